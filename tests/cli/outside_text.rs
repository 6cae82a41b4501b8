//! Strings from outside reach no output raw: an agent (or an imported
//! document) whose host name holds ESC, BEL, U+202E and a line break is
//! shown escaped by `tcp`, `runs`, `show`, `compare` (text, Markdown, CSV)
//! and `export --format csv`, and the SVG chart and the HTML report's
//! charts still parse as XML.

use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::common::{nicbench, stderr, AgentProcess, BIN};

/// A host name that retitles the terminal (ESC ] 0 ; ... BEL), turns what
/// follows right to left (U+202E), breaks the line, and starts with `=`
/// (a spreadsheet formula).
const HOSTILE: &str = "=evil\u{1b}]0;pwned\u{7}\u{202e}gpj\nnext";

/// How a terminal, Markdown and text files show it.
const SHOWN: &str = r"=evil\x1b]0;pwned\x07\u{202e}gpj\nnext";

/// How a CSV cell holds it: controls but the line break escaped, and the
/// leading `'` that keeps a spreadsheet from running it.
const CSV_CELL: &str = "'=evil\\x1b]0;pwned\\x07\\u{202e}gpj\nnext";

/// Characters that must never reach an output raw.
const RAW: [char; 3] = ['\u{1b}', '\u{7}', '\u{202e}'];

/// stdout of a `nicbench` command that must succeed.
fn output(args: &[&str]) -> String {
    let out = nicbench(args);
    assert!(out.status.success(), "nicbench {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn assert_escaped(what: &str, text: &str) {
    assert!(
        !text.contains(RAW),
        "{what} prints a control or bidi character raw:\n{text:?}"
    );
    assert!(
        text.contains(SHOWN),
        "{what} does not show the host name escaped:\n{text}"
    );
}

/// Every reading output of the database `db`, whose one run's agent is
/// named [`HOSTILE`].
fn check_every_output(dir: &std::path::Path, db: &str) {
    assert_escaped("runs", &output(&["runs", "--db", db]));
    assert_escaped("show", &output(&["show", "--db", db, "1"]));
    assert_escaped("compare", &output(&["compare", "--db", db, "--rows", "agent"]));

    let md = output(&["compare", "--db", db, "--rows", "agent", "--format", "markdown"]);
    assert!(!md.contains(RAW), "{md:?}");
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(table.len(), 3, "header, alignment and one row:\n{md}");
    assert!(table[2].starts_with(&format!("| {SHOWN} | ")), "{md}");

    for args in [
        &["compare", "--db", db, "--rows", "agent", "--format", "csv"][..],
        &["export", "--db", db, "--format", "csv"][..],
    ] {
        let csv = output(args);
        assert!(!csv.contains(RAW), "{args:?}: {csv:?}");
        let cells: Vec<String> = csv::ReaderBuilder::new()
            .from_reader(csv.as_bytes())
            .records()
            .flat_map(|r| r.unwrap().iter().map(String::from).collect::<Vec<_>>())
            .collect();
        assert!(
            cells.iter().any(|c| c == CSV_CELL),
            "{args:?}: the host name is not one neutralised cell: {cells:?}"
        );
    }

    let svg_path = dir.join("bars.svg");
    output(&[
        "plot",
        "--db",
        db,
        "--kind",
        "bars",
        "--group",
        "agent",
        "-o",
        svg_path.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(!svg.contains(RAW), "{svg:?}");
    roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("the chart is not XML: {e}"));

    let page = dir.join("report.html");
    output(&["report", "--db", db, "--rows", "agent", "-o", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains(RAW), "{html:?}");
    assert!(html.contains(r"=evil]0;pwned\u{202e}gpj"), "the host name is not shown");
    let charts: Vec<&str> = html
        .split("<svg ")
        .skip(1)
        .map(|rest| rest.split("</svg>").next().unwrap())
        .collect();
    assert!(!charts.is_empty(), "the report has no chart");
    for chart in charts {
        let svg = format!("<svg {chart}</svg>");
        roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("a chart of the report is not XML: {e}"));
    }
}

#[test]
fn an_imported_host_name_with_controls_reaches_no_output_raw() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run-tcp.json");
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    doc["agent"]["facts"]["hostname"] = HOSTILE.into();
    let file = dir.path().join("hostile.json");
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let db = dir.path().join("r.db").display().to_string();
    output(&["import", "--db", &db, file.to_str().unwrap()]);
    check_every_output(dir.path(), &db);
}

/// Ok as root: the agent gets a host name of its own in a new UTS
/// namespace (which needs CAP_SYS_ADMIN).
fn root() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err("an agent with its own host name needs root (a UTS namespace)".into())
    }
}

#[test]
fn an_agent_whose_host_name_holds_controls_is_shown_escaped_by_every_output() {
    require!(root());
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(BIN);
    // SAFETY: between fork and exec only async-signal-safe calls
    // (unshare, sethostname) on memory the closure owns.
    unsafe {
        command.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWUTS) != 0 || libc::sethostname(HOSTILE.as_ptr().cast(), HOSTILE.len()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let agent = AgentProcess::start_with(command, "127.0.0.1", &[]);
    let db = dir.path().join("r.db").display().to_string();
    let port = agent.port_arg();
    let tcp = output(&["tcp", "127.0.0.1", "-p", &port, "-t", "0.5", "--db", &db]);
    assert_escaped("tcp", &tcp);
    let first = tcp.lines().next().unwrap_or("");
    assert!(
        first.ends_with(&format!("-> agent {SHOWN} (127.0.0.1:{port})")),
        "{tcp}"
    );
    check_every_output(dir.path(), &db);
}
