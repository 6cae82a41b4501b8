//! The layers of docs/ARCHITECTURE.md, checked on the source.
//!
//! Between top-level modules: every top-level module of `src/` has a floor;
//! a module may name modules on lower floors, and modules on its own floor
//! only where no circle forms; never one above it. Floor 5 has floors of its
//! own (5a above 5b, ...), held to the same rule.
//!
//! Inside a top-level module: no circle between its files. A file names
//! another when a path in it (`crate::`, `super::`, `self::`, a child
//! module's name) resolves into that file; what counts and what does not is
//! at the top of `layers/files.rs`.
//!
//! The test reads every path in the code of `src/` (comments and string
//! literals left out, `use` groups opened) and prints each offending import
//! as `file:line`. A new top-level module gets a floor here and in
//! ARCHITECTURE.md, or the test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use files::File;

mod files;
mod names;
mod source;
mod transports;

/// Floors, top (1) to bottom (9), as drawn in docs/ARCHITECTURE.md. A
/// floor with a letter is part of the floor of its number, in an order of
/// its own: 5a above 5b above 5c above 5d.
const FLOORS: &[(&str, &str)] = &[
    // The binary.
    ("main", "1"),
    // The command line: one function per subcommand (presentation only),
    // and the clap definitions those functions are handed.
    ("cmd", "2"),
    ("cli", "2"),
    // What runs many tests: plans, meshes, the agent, the lab.
    ("plan", "3"),
    ("agent", "3"),
    ("lab", "3"),
    // One test, client side; iperf3's protocol as an adapter over it.
    ("session", "4"),
    ("iperf3", "4"),
    // What a test's results become, and one side of a trial. On top, what
    // shows results (it must not run anything); then what runs trials (it
    // must not show anything: engines produce, reporters render); then
    // what results mean, judged from data alone; at the bottom, where
    // they are kept.
    ("report", "5a"),
    ("metrics", "5a"),
    ("repeat", "5b"),
    ("side_runner", "5b"),
    ("verdict", "5c"),
    ("mesh", "5c"),
    ("store", "5d"),
    // Traffic engines behind one trait, and the multi-link aggregate.
    ("workload", "6"),
    ("multilink", "6"),
    // Host probes, control messages, addresses as users write them.
    ("probe", "7"),
    ("protocol", "7"),
    ("address", "7"),
    ("lab_env", "7"),
    // Result types.
    ("model", "8"),
    // Plain values and helpers that name nothing in the crate.
    ("units", "9"),
    ("stats", "9"),
    ("linerate", "9"),
    ("logging", "9"),
    ("shell", "9"),
    ("csv_out", "9"),
    ("outside_text", "9"),
    ("chart_kit", "9"),
];

/// One path in the code that names another module or file: where it is,
/// and what it goes from and to (top-level modules, or files).
#[derive(Debug, Clone)]
struct Import {
    from: String,
    to: String,
    file: String,
    line: usize,
    text: String,
}

/// A module's floor as drawn (`3`, `5b`).
fn floor(module: &str) -> Option<&'static str> {
    FLOORS.iter().find(|(name, _)| *name == module).map(|&(_, floor)| floor)
}

/// A floor as it sorts, top first: its number, then its letter (none
/// before `a`; a floor has letters on every module or on none).
fn height(floor: &str) -> (u8, String) {
    let digits = floor.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let number = digits.parse().expect("a floor is a number, maybe with a letter");
    (number, floor[digits.len()..].to_string())
}

/// Every import between two different top-level modules in `files`.
fn imports(files: &[File]) -> Vec<Import> {
    let mut all = Vec::new();
    for file in files {
        let Some(from) = file.top() else { continue };
        for written in &file.read.paths {
            let Some(to) = source::absolute(written, &file.module).and_then(|path| path.first().cloned()) else {
                continue;
            };
            if to != from {
                let (path, text) = file.at(written.line);
                all.push(Import {
                    from: from.to_string(),
                    to,
                    file: path,
                    line: written.line,
                    text,
                });
            }
        }
    }
    all
}

/// Everything wrong with the layers of `files`: modules without a floor,
/// imports from a lower floor to a higher one, and circles between
/// top-level modules (each with the imports that close it).
fn violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let files = files::read_all(files);
    let imports = imports(&files);
    let mut problems = Vec::new();
    let modules: BTreeSet<&str> = files.iter().filter_map(File::top).collect();
    for module in &modules {
        if floor(module).is_none() {
            problems.push(format!(
                "src/{module}: no floor; give it one in tests/cli/layers.rs and docs/ARCHITECTURE.md"
            ));
        }
    }
    for i in &imports {
        let (Some(from), Some(to)) = (floor(&i.from), floor(&i.to)) else {
            continue;
        };
        if height(to) < height(from) {
            problems.push(format!(
                "{}:{}: upward import: {} (floor {from}) names {} (floor {to}): {}",
                i.file, i.line, i.from, i.to, i.text
            ));
        }
    }
    for circle in circles(&imports) {
        let inside: Vec<String> = imports
            .iter()
            .filter(|i| circle.contains(&i.from) && circle.contains(&i.to))
            .map(|i| format!("  {}:{}: {} -> {}: {}", i.file, i.line, i.from, i.to, i.text))
            .collect();
        let names: Vec<&str> = circle.iter().map(String::as_str).collect();
        problems.push(format!("circle between {}:\n{}", names.join(", "), inside.join("\n")));
    }
    let between_files = files::imports(&files);
    for circle in circles(&between_files) {
        // One line per import, in file and line order: `use a::{b, c}`
        // names a file twice.
        let inside: BTreeSet<(&str, usize, &str, &str)> = between_files
            .iter()
            .filter(|i| circle.contains(&i.from) && circle.contains(&i.to))
            .map(|i| (i.file.as_str(), i.line, i.to.as_str(), i.text.as_str()))
            .collect();
        let inside: Vec<String> = inside
            .into_iter()
            .map(|(file, line, to, text)| format!("  {file}:{line}: -> {to}: {text}"))
            .collect();
        let names: Vec<&str> = circle.iter().map(String::as_str).collect();
        problems.push(format!(
            "circle between files {}:\n{}",
            names.join(", "),
            inside.join("\n")
        ));
    }
    problems
}

/// The sets of top-level modules that import each other, directly or
/// around a longer loop (strongly connected components of two or more).
fn circles(imports: &[Import]) -> Vec<BTreeSet<String>> {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for i in imports {
        edges.entry(&i.from).or_default().insert(&i.to);
        edges.entry(&i.to).or_default();
    }
    let reaches = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start];
        while let Some(m) = todo.pop() {
            for &next in &edges[m] {
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&str, BTreeSet<&str>> = edges.keys().map(|&m| (m, reaches(m))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (&m, from_m) in &reach {
        let circle: BTreeSet<String> = from_m
            .iter()
            .filter(|&&other| other != m && reach[other].contains(m))
            .chain(std::iter::once(&m))
            .map(|s| s.to_string())
            .collect();
        if circle.len() > 1 && !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

fn rust_files(root: &Path, path: &Path, out: &mut Vec<(PathBuf, String)>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(root, &entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        let text = std::fs::read_to_string(path).unwrap();
        out.push((path.strip_prefix(root).unwrap().to_path_buf(), text));
    }
}

fn source_tree() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    files.sort();
    files
}

#[test]
fn every_module_imports_only_from_below_and_without_circles() {
    let problems = violations(&source_tree());
    assert!(problems.is_empty(), "the layers are broken:\n{}", problems.join("\n"));
}

/// Transports stand below the workloads they serve (issue 68): a file under
/// `workload/transport/` names transports and the base layer
/// (`workload/base/`: errors, the network context, the stream runner,
/// figures), never the registry of workloads or a workload.
const TRANSPORTS: &[&str] = &["workload", "transport"];
const BASE: &[&str] = &["workload", "base"];

#[test]
fn transports_name_only_transports_and_the_base_layer() {
    let problems = files::reaches_outside(&files::read_all(&source_tree()), TRANSPORTS, &[BASE]);
    assert!(
        problems.is_empty(),
        "a transport names what stands above it:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_transport_naming_the_registry_or_a_workload_is_named_with_its_line() {
    let tree = [
        file(
            "workload/mod.rs",
            "pub mod base;\npub mod transport;\npub mod udp;\npub use base::Aborter;\npub static REGISTRY: &[u8] = &[];\n",
        ),
        file("workload/base/mod.rs", "pub type Aborter = u8;\n"),
        file("workload/udp/mod.rs", "pub const KEY: &str = \"udp\";\n"),
        file("workload/transport/mod.rs", "pub mod tcp;\npub struct Proto;\n"),
        file(
            "workload/transport/tcp.rs",
            "use crate::workload::Aborter;\nuse super::Proto;\nfn f() {\n    let _ = crate::workload::udp::KEY;\n    \
             let _ = super::super::REGISTRY;\n}\n#[cfg(test)]\nmod tests {\n    use crate::workload::udp::KEY;\n}\n",
        ),
    ];
    assert_eq!(
        files::reaches_outside(&files::read_all(&tree), TRANSPORTS, &[BASE]),
        [
            "src/workload/transport/tcp.rs:4: -> src/workload/udp/mod.rs: let _ = crate::workload::udp::KEY;",
            "src/workload/transport/tcp.rs:5: -> src/workload/mod.rs: let _ = super::super::REGISTRY;",
        ]
    );
}

#[test]
fn every_declared_module_has_a_floor_and_every_floor_a_module() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    let floors: BTreeSet<&str> = FLOORS.iter().map(|(m, _)| *m).filter(|m| *m != "main").collect();
    assert_eq!(
        declared, floors,
        "src/lib.rs and the floors here list different modules"
    );
}

/// The floors drawn in the code block of docs/ARCHITECTURE.md's "Layers":
/// a line `N  names  description` opens floor N (`5a`), a line indented to
/// the names adds to it, a line indented further continues a description.
fn drawn_floors(map: &str) -> BTreeSet<(String, String)> {
    let section = map
        .split("## Layers")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a Layers section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the Layers section draws the floors in a code block");
    let mut floor = String::new();
    let mut names_at = 0;
    let mut drawn = BTreeSet::new();
    for line in block.lines().skip(1) {
        let indent = line.len() - line.trim_start().len();
        if indent == 0 {
            let Some((label, rest)) = line.split_once(' ') else {
                continue;
            };
            floor = label.to_string();
            names_at = line.len() - rest.trim_start().len();
        } else if indent != names_at {
            continue;
        }
        let names = line[names_at..].split("  ").next().unwrap_or("");
        for name in names.split(',') {
            drawn.insert((name.trim().to_string(), floor.clone()));
        }
    }
    drawn
}

#[test]
fn the_map_draws_every_floor() {
    let map = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md")).unwrap();
    let floors: BTreeSet<(String, String)> = FLOORS.iter().map(|&(m, f)| (m.to_string(), f.to_string())).collect();
    assert_eq!(
        drawn_floors(&map),
        floors,
        "docs/ARCHITECTURE.md draws other floors than this test checks"
    );
}

fn file(path: &str, text: &str) -> (PathBuf, String) {
    (PathBuf::from(path), text.to_string())
}

#[test]
fn an_upward_import_is_named_with_its_line() {
    let files = [
        file(
            "model/run.rs",
            "use std::fmt;\nuse crate::units::Rate;\nuse crate::session::Target;\n",
        ),
        file("session.rs", "use crate::units::Bytes;\n"),
    ];
    assert_eq!(
        violations(&files),
        ["src/model/run.rs:3: upward import: model (floor 8) names session (floor 4): use crate::session::Target;"]
    );
}

#[test]
fn a_circle_on_one_floor_is_named_with_both_imports() {
    let files = [
        file("plan/runner.rs", "fn f() { crate::agent::serve(); }\n"),
        file(
            "agent/mod.rs",
            "use crate::{\n    model::Verdict,\n    plan::runner,\n};\n",
        ),
    ];
    let problems = violations(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("circle between agent, plan:"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/plan/runner.rs:1: plan -> agent"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/agent/mod.rs:3: agent -> plan"),
        "{}",
        problems[0]
    );
}

#[test]
fn floor_five_has_an_order_of_its_own() {
    let files = [
        file(
            "report/text.rs",
            "use crate::verdict::Verdict;\nuse crate::store::Store;\n",
        ),
        file(
            "verdict.rs",
            "use crate::store::Store;\nuse crate::side_runner::Trial;\n",
        ),
        file("side_runner.rs", ""),
        file("store/mod.rs", ""),
    ];
    assert_eq!(
        violations(&files),
        ["src/verdict.rs:2: upward import: verdict (floor 5c) names side_runner (floor 5b): use crate::side_runner::Trial;"]
    );
}

#[test]
fn modules_on_one_lettered_floor_may_not_form_a_circle_either() {
    let files = [
        file("verdict.rs", "use crate::mesh::Matrix;\n"),
        file("mesh/matrix.rs", "use crate::verdict::Verdict;\n"),
    ];
    let problems = violations(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("circle between mesh, verdict:"),
        "{}",
        problems[0]
    );
}

#[test]
fn floors_sort_by_number_then_letter() {
    assert!(height("4") < height("5a"));
    assert!(height("5a") < height("5b"));
    assert!(height("5d") < height("6"));
    assert!(height("10") > height("9"));
}

#[test]
fn comments_strings_and_other_crates_are_not_imports() {
    let files = [file(
        "model/a.rs",
        "//! Used by crate::session.\n\
         /* crate::agent /* nested */ crate::cmd */\n\
         const A: &str = \"crate::cli\";\n\
         const B: &str = r#\"crate::plan \" \"#;\n\
         const C: char = '\"';\n\
         fn f<'a>(x: &'a str) -> &'a str { x } // crate::trial\n\
         use othercrate::session;\n",
    )];
    assert_eq!(violations(&files), Vec::<String>::new());
}

#[test]
fn a_module_without_a_floor_is_named() {
    let files = [file("newthing/mod.rs", "")];
    assert_eq!(violations(&files).len(), 1);
}

/// No workload name outside `src/workload/` beyond what
/// `layers/workload_names.txt` still counts (see `layers/names.rs`).
#[test]
fn no_workload_name_outside_its_folder_beyond_the_counted() {
    let (modules, names) = names::registry();
    let files = files::read_all(&source_tree());
    let found = names::leaks(&files, &modules, &names);
    let counts = names::counted(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/layers/workload_names.txt"))
            .unwrap(),
    );
    let problems = names::against(&found, &counts);
    assert!(
        problems.is_empty(),
        "workload names outside src/workload/:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_workload_name_added_to_the_report_is_named_with_its_line() {
    let (modules, names) = names::registry();
    let files = files::read_all(&[
        file(
            "report/extra.rs",
            "use crate::workload::sweep::result::KEY;\n// \"sweep\" in a comment is prose\nfn f(w: &str) -> bool {\n    w == \"sweep\" || w == \"sweeps\"\n}\n\
             #[cfg(test)]\nmod tests {\n    use crate::workload::sweep::result::KEY;\n    const W: &str = \"sweep\";\n}\n",
        ),
        file(
            "report/alias.rs",
            "use crate::workload::{self, ResultKind};\npub struct A {\n    s: workload::files::Storage,\n    k: workload::ChartKind,\n}\n",
        ),
        file(
            "report/ident.rs",
            "pub enum Chart {\n    Sweep(u8),\n    SweepLine,\n}\nstruct TcpInfo; // Sweep in prose\n",
        ),
        file("report/extra_tests.rs", "const W: &str = \"rr\";\n"),
        file("report/mod.rs", "mod alias;\nmod extra;\nmod ident;\n#[cfg(test)]\n#[path = \"extra_tests.rs\"]\nmod tests;\n"),
        file("workload/sweep/mod.rs", "pub mod result;\n"),
        file("workload/sweep/result.rs", "pub const KEY: &str = \"sweep\";\n"),
    ]);
    let found = names::leaks(&files, &modules, &names);
    let at: Vec<(&str, usize)> = found.iter().map(|l| (l.file.as_str(), l.line)).collect();
    assert_eq!(
        at,
        [
            ("src/report/alias.rs", 3),
            ("src/report/extra.rs", 1),
            ("src/report/extra.rs", 4),
            ("src/report/ident.rs", 2)
        ],
        "{found:?}"
    );
    let found: Vec<names::Leak> = found.into_iter().filter(|l| l.file.ends_with("extra.rs")).collect();
    let problems = names::against(&found, &Default::default());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("src/report/extra.rs:1: path into workload::sweep"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/report/extra.rs:4: the literal \"sweep\""),
        "{}",
        problems[0]
    );
    // Counted: fine; counted higher than found: lower the count.
    let counts = [("src/report/extra.rs".to_string(), 2)].into_iter().collect();
    assert!(names::against(&found, &counts).is_empty());
    let counts = [("src/report/extra.rs".to_string(), 3)].into_iter().collect();
    assert!(names::against(&found, &counts)[0].contains("lower its count"));
}

/// No transport named in a workload's production code beyond what
/// `layers/transport_names.txt` still counts (see `layers/transports.rs`).
#[test]
fn no_transport_named_by_a_workload_beyond_the_counted() {
    let files = files::read_all(&source_tree());
    let found = transports::leaks(&files, &transports::registry());
    let counts = names::counted(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/layers/transport_names.txt"))
            .unwrap(),
    );
    let problems = transports::against(&found, &counts);
    assert!(
        problems.is_empty(),
        "transports named by workloads:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_transport_named_by_a_workload_is_named_with_its_line() {
    let tree = [
        file("workload/mod.rs", "pub mod rr;\npub mod transport;\n"),
        file(
            "workload/transport/mod.rs",
            "pub mod quic;\npub mod tls;\npub struct Proto;\n",
        ),
        file("workload/transport/quic.rs", "pub const KEY: &str = \"quic\";\n"),
        file("workload/transport/tls.rs", "pub fn check() {}\n"),
        file(
            "workload/rr/mod.rs",
            "use super::transport::{self, quic, Proto};\n// transport::tls in prose\nfn f(p: Proto) -> bool {\n    \
             transport::tls::check();\n    p == Proto::QUIC || p == Proto::TCPX\n}\nfn g() {\n    \
             crate::workload::transport::tls::check();\n}\n#[cfg(test)]\nmod tests {\n    \
             use crate::workload::transport::tls::check;\n}\n",
        ),
    ];
    let names: Vec<String> = ["tcp", "quic", "tls"].map(String::from).to_vec();
    let found = transports::leaks(&files::read_all(&tree), &names);
    let at: Vec<(&str, usize)> = found.iter().map(|l| (l.file.as_str(), l.line)).collect();
    assert_eq!(
        at,
        [
            ("src/workload/rr/mod.rs", 1),
            ("src/workload/rr/mod.rs", 4),
            ("src/workload/rr/mod.rs", 5),
            ("src/workload/rr/mod.rs", 8)
        ],
        "{found:?}"
    );
    let counts = [("src/workload/rr/mod.rs".to_string(), 3)].into_iter().collect();
    assert!(transports::against(&found, &counts)[0].contains("on 4 line(s), 3 counted"));
    let counts = [("src/workload/rr/mod.rs".to_string(), 5)].into_iter().collect();
    assert!(transports::against(&found, &counts)[0].contains("lower its count"));
}

#[test]
fn a_workload_name_is_written_as_a_type_in_upper_camel_case() {
    assert_eq!(names::upper_camel("sweep"), "Sweep");
    assert_eq!(names::upper_camel("rr"), "Rr");
    assert_eq!(names::upper_camel("loaded-cdf"), "LoadedCdf");
    assert_eq!(names::upper_camel("tcp_stream"), "TcpStream");
}

#[test]
fn literals_are_read_outside_comments_with_their_lines() {
    let text =
        "let a = \"rr\"; // \"sweep\"\n/* \"files\" */ let b = r#\"lo\"aded\"#;\nlet c = '\"'; let d = \"x\\\"y\";\n";
    let found = names::literals(text);
    assert_eq!(
        found,
        [
            (1, "rr".to_string()),
            (2, "lo\"aded".to_string()),
            (3, "x\\\"y".to_string())
        ]
    );
}

#[test]
fn the_workload_folders_are_read_from_the_registry() {
    let (modules, names) = names::registry();
    assert!(
        modules.contains(&"tcp_stream".to_string()) && modules.contains(&"sweep".to_string()),
        "{modules:?}"
    );
    assert!(names.contains(&"tcp".to_string()), "{names:?}");
}
