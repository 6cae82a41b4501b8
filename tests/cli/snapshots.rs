//! Snapshot tests of the text report on fixed result documents
//! (tests/fixtures/run-*.json, written by real runs and committed): any
//! change to what a user reads shows up as a diff of
//! tests/cli/snapshots/*.snap. Review a change with `cargo insta review`
//! (or rerun with `INSTA_UPDATE=always` and read the diff in git).

use std::path::PathBuf;

use nicbench::model::RunResult;
use nicbench::report::text::{Text, DEFAULT_WIDTH};

fn fixture(name: &str) -> RunResult {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The report as printed to a pipe or file (fitted to the default width)
/// and as printed with `-v` (not fitted), both in one snapshot.
fn rendered(name: &str) -> String {
    let run = fixture(name);
    let mut fitted = Vec::new();
    Text.render_fitted(&run, Some(DEFAULT_WIDTH), &mut fitted).unwrap();
    let mut full = Vec::new();
    Text.render_fitted(&run, None, &mut full).unwrap();
    format!(
        "--- fitted to {DEFAULT_WIDTH} columns ---\n{}--- not fitted (-v) ---\n{}",
        String::from_utf8(fitted).unwrap(),
        String::from_utf8(full).unwrap()
    )
}

macro_rules! snapshot {
    ($test:ident, $fixture:literal) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!($fixture, rendered($fixture));
        }
    };
}

snapshot!(text_report_of_tcp, "run-tcp");
snapshot!(text_report_of_tcp_with_repetitions, "run-tcp-repeat");
snapshot!(
    text_report_of_tcp_with_line_rate_and_repetitions,
    "run-tcp-linerate-repeat"
);
snapshot!(text_report_of_udp, "run-udp");
snapshot!(text_report_of_udp_bidir, "run-udp-bidir");
snapshot!(text_report_of_rr, "run-rr");
snapshot!(text_report_of_sweep, "run-sweep");
