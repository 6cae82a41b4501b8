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

/// What a tampered lab state file may hold in every string: a retitle
/// (ESC ] 0 ; ... BEL), a screen clear (ESC [ 2 J), a CSI as one C1
/// character (U+009B), a right-to-left override, and a forged message line.
const TAMPERED: &str = "evil\u{1b}]0;title\u{7}\u{1b}[2J\u{9b}31m\u{202e}gpj\nnicbench: all labs removed";

/// Characters of [`TAMPERED`] that must never reach a terminal raw.
const RAW_TAMPERED: [char; 4] = ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'];

/// Fails when `bytes` (an output of `what`) holds a raw control: ESC, BEL,
/// a C1 character or a lone 0x9b byte (not UTF-8 at all), a bidi control,
/// or a line that starts as nicbench's own messages do but was forged.
fn assert_no_raw_controls(what: &str, stream: &str, bytes: &[u8]) {
    let text = assert_no_raw_characters(what, stream, bytes);
    assert!(
        !text.lines().any(|l| l.starts_with("nicbench: all labs removed")),
        "{what}: its {stream} holds a forged line:\n{text}"
    );
}

/// A CSV's line breaks inside a quoted cell are the CSV's (docs/REPORT.md):
/// as [`assert_no_raw_controls`], but a forged line is one only when it is
/// a record of its own.
fn assert_csv_without_raw_controls(what: &str, bytes: &[u8]) {
    assert_no_raw_characters(what, "stdout", bytes);
    for record in csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes)
        .records()
    {
        let record = record.unwrap_or_else(|e| panic!("{what}: not CSV: {e}"));
        assert!(
            !record
                .iter()
                .next()
                .unwrap_or("")
                .starts_with("nicbench: all labs removed"),
            "{what}: a forged record {record:?}"
        );
    }
}

/// The text of `bytes`, failing when it is not UTF-8 or holds a character
/// of [`RAW_TAMPERED`].
fn assert_no_raw_characters<'a>(what: &str, stream: &str, bytes: &'a [u8]) -> &'a str {
    let text = std::str::from_utf8(bytes).unwrap_or_else(|e| {
        panic!(
            "{what}: its {stream} is not UTF-8 ({e}), a raw 0x9b byte would be a CSI: {:?}",
            String::from_utf8_lossy(bytes)
        )
    });
    assert!(
        !text.contains(RAW_TAMPERED),
        "{what}: its {stream} prints a control or bidi character raw:\n{text:?}"
    );
    text
}

/// A lab state file as `lab up` writes it, with [`TAMPERED`] in every
/// string a person reads in `lab status`.
fn tampered_state() -> serde_json::Value {
    serde_json::json!({
        "schema": "nicbench.lab/1",
        "name": TAMPERED,
        "topology": "direct",
        "complete": true,
        "created_by_pid": 1,
        "created_unix_seconds": 1_790_000_000u64,
        "agent_port": null,
        "hosts": [
            {"name": TAMPERED, "netns": TAMPERED, "router": false, "cpu_limit_percent": null,
             "cgroup": null, "agent_pid": null},
            {"name": "b", "netns": "nb-evil-b", "router": false, "cpu_limit_percent": 50.0,
             "cgroup": null, "agent_pid": null},
        ],
        "links": [{
            "id": 1,
            "mtu": 1500,
            "ends": [
                {"host": TAMPERED, "ifname": TAMPERED, "address": "127.0.0.1", "rate_bits_per_second": null},
                {"host": "b", "ifname": TAMPERED, "address": "127.0.0.2", "rate_bits_per_second": 1_000_000},
            ],
        }],
        "made_by": {"user": TAMPERED, "terminal": TAMPERED, "remote": TAMPERED},
    })
}

/// `nicbench ARGS` with its lab state under `lab_dir`, killed (and the test
/// failed) past `limit`.
fn nicbench_in_lab_dir(lab_dir: &std::path::Path, args: &[&str], limit: std::time::Duration) -> std::process::Output {
    let mut command = Command::new(BIN);
    crate::common::clean_env(&mut command)
        .args(args)
        .env("NICBENCH_LAB_DIR", lab_dir)
        .env("COLUMNS", "1000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().expect("run nicbench");
    crate::common::wait_output(child, limit, &format!("nicbench {args:?}"))
}

/// Issue 41, F: `lab status` printed a tampered state file's strings raw.
/// Every string of the file is shown escaped, on its own line; a file that
/// is not even UTF-8 (a raw 0x9b byte) is an error naming the file.
#[test]
fn lab_status_from_a_tampered_state_file_prints_no_terminal_escapes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("evil.json"),
        serde_json::to_vec_pretty(&tampered_state()).unwrap(),
    )
    .unwrap();
    let mut raw = serde_json::to_vec(&tampered_state()).unwrap();
    // The user's name with a lone 0x9b byte: not UTF-8, not JSON text.
    let at = raw.windows(6).position(|w| w == b"\"user\"").unwrap() + 9;
    raw.insert(at, 0x9b);
    std::fs::write(dir.path().join("raw.json"), &raw).unwrap();
    let limit = std::time::Duration::from_secs(60);

    let out = nicbench_in_lab_dir(dir.path(), &["lab", "status", "evil"], limit);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_raw_controls("lab status evil", "stdout", &out.stdout);
    assert_no_raw_controls("lab status evil", "stderr", &out.stderr);
    let text = String::from_utf8(out.stdout).unwrap();
    let shown = r"evil\x1b]0;title\x07\x1b[2J\u{9b}31m\u{202e}gpj\nnicbench: all labs removed";
    assert!(
        text.starts_with(&format!("lab {shown}: direct, 2 hosts, 1 link")),
        "{text}"
    );
    assert!(
        text.contains(&format!("made by {shown} on {shown} from {shown} at ")),
        "{text}"
    );
    assert!(text.contains(&format!("  {shown} netns {shown}, no agent")), "{text}");

    let out = nicbench_in_lab_dir(dir.path(), &["lab", "status", "evil", "--json"], limit);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_raw_controls("lab status evil --json", "stdout", &out.stdout);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["lab"]["name"], TAMPERED, "the JSON keeps the data, escaped");

    let out = nicbench_in_lab_dir(dir.path(), &["lab", "status", "raw"], limit);
    assert_ne!(out.status.code(), Some(0));
    assert_no_raw_controls("lab status raw", "stdout", &out.stdout);
    assert_no_raw_controls("lab status raw", "stderr", &out.stderr);
    let err = stderr(&out);
    assert!(
        err.contains(&dir.path().join("raw.json").display().to_string()) && err.contains("UTF-8"),
        "{err}"
    );

    // The list reads every lab of the machine: it asks `ip` for namespaces.
    require!(crate::common::tool("ip", &["netns", "list"], "install iproute2"));
    let out = nicbench_in_lab_dir(dir.path(), &["lab", "status"], limit);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_raw_controls("lab status", "stdout", &out.stdout);
    assert_no_raw_controls("lab status", "stderr", &out.stderr);
    let text = String::from_utf8(out.stdout).unwrap();
    let evil = text
        .lines()
        .find(|l| l.starts_with("evil\t"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        evil.contains(&format!("\tmade by {shown} on {shown} from {shown} at ")),
        "{evil}"
    );
    let raw_line = text
        .lines()
        .find(|l| l.starts_with("raw\t"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(raw_line.contains("raw.json"), "{raw_line}");
}

/// Every string of a run document a peer or an imported file chooses (host
/// facts, interface and congestion control names) set to [`TAMPERED`].
fn hostile_strings(doc: &mut serde_json::Value) {
    fn walk(v: &mut serde_json::Value, key: &str) {
        const CHOSEN_OUTSIDE: [&str; 8] = [
            "hostname",
            "kernel",
            "cpu_model",
            "os",
            "nicbench_version",
            "name",
            "qdisc",
            "congestion_control",
        ];
        match v {
            // A loaded phase's name is one of nicbench's own (its queues
            // are named by the host).
            serde_json::Value::Object(map) if map.contains_key("queues") => map
                .iter_mut()
                .filter(|(k, _)| *k != "name")
                .for_each(|(k, v)| walk(v, k)),
            serde_json::Value::Object(map) => map.iter_mut().for_each(|(k, v)| walk(v, k)),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| walk(v, key)),
            serde_json::Value::String(s) if CHOSEN_OUTSIDE.contains(&key) => *s = TAMPERED.into(),
            _ => {}
        }
    }
    walk(doc, "");
}

/// Issue 41, F and E together: every subcommand that reads the database
/// (and `lab status`, which reads a state file), over a database whose
/// peer strings are all [`TAMPERED`] and whose every figure is 1.7e308,
/// and a tampered lab state file. No output (stdout, stderr, a chart or
/// page written) holds a raw control, bidi or C1 character or a forged
/// line; none panics; each finishes within its deadline (a hang is
/// killed and fails the test; no speed is asserted).
#[test]
fn every_reading_subcommand_over_a_hostile_database_and_state_file_prints_no_terminal_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::extremes::poisoned_database_of(dir.path(), 1.7e308, &hostile_strings);
    let labs = dir.path().join("labs");
    std::fs::create_dir(&labs).unwrap();
    std::fs::write(
        labs.join("evil.json"),
        serde_json::to_vec_pretty(&tampered_state()).unwrap(),
    )
    .unwrap();
    let at = |name: &str| dir.path().join(name).display().to_string();
    // (arguments, a file the command writes). Store commands get --db.
    let table: Vec<(Vec<String>, Option<String>)> = {
        let words = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let mut rows: Vec<(Vec<String>, Option<String>)> = [
            &["runs"][..],
            &["show", "1"],
            &["show", "1", "--json"],
            &["show", "2"],
            &["compare"],
            &["compare", "--rows", "agent"],
            &["compare", "--format", "markdown"],
            &["compare", "--format", "csv"],
            &["compare", "--rows", "agent", "--format", "json"],
            &["diff", "1", "2"],
            &["export"],
            &["export", "--format", "csv"],
            &["rm", "999"],
        ]
        .iter()
        .map(|args| (words(args), None))
        .collect();
        for kind in ["bars", "sweep", "cpu", "latency", "loaded", "loaded-cdf"] {
            let file = at(&format!("{kind}.svg"));
            rows.push((words(&["plot", "--kind", kind, "-o", &file]), Some(file)));
        }
        let file = at("timeline.svg");
        rows.push((
            words(&["plot", "--kind", "timeline", "--id", "1", "-o", &file]),
            Some(file),
        ));
        let file = at("report.html");
        rows.push((words(&["report", "-o", &file]), Some(file)));
        rows.push((words(&["db", "backup", &at("backup.db")]), None));
        for row in &mut rows {
            row.0.extend(["--db".to_string(), db.clone()]);
        }
        rows.push((words(&["lab", "status", "evil"]), None));
        rows.push((words(&["lab", "status", "evil", "--json"]), None));
        rows
    };
    // Far beyond what any of them takes; only a hang reaches it.
    let limit = std::time::Duration::from_secs(30);
    // The commands that show the hostile strings at all, escaped: the
    // walk reads what it means to read, not an early error.
    let mut shown_by = Vec::new();
    for (args, file) in &table {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let what = format!("nicbench {}", args.join(" "));
        let out = nicbench_in_lab_dir(&labs, &args, limit);
        let code = out.status.code();
        assert!(code.is_some() && code != Some(101), "{what}: {code:?} {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{what}: {}", stderr(&out));
        if args.contains(&"csv") && code == Some(0) {
            assert_csv_without_raw_controls(&what, &out.stdout);
        } else {
            assert_no_raw_controls(&what, "stdout", &out.stdout);
        }
        assert_no_raw_controls(&what, "stderr", &out.stderr);
        if let Some(file) = file.as_deref().filter(|f| std::path::Path::new(f).exists()) {
            // SVG and HTML keep a line break in text (docs/REPORT.md): a
            // browser shows it as a space, so only the characters count.
            assert_no_raw_characters(&what, file, &std::fs::read(file).unwrap());
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        if stdout.contains(r"\x1b]0;title\x07") || stdout.contains(r"\u001b]0;title\u0007") {
            shown_by.push(args[..args.iter().position(|a| *a == "--db").unwrap_or(args.len())].join(" "));
        }
    }
    for expected in [
        "runs",
        "show 1",
        "show 1 --json",
        "compare --rows agent",
        "export",
        "export --format csv",
        "lab status evil",
        "lab status evil --json",
    ] {
        assert!(
            shown_by.iter().any(|s| s == expected),
            "{expected} does not show the hostile strings escaped; those that do: {shown_by:?}"
        );
    }
}

/// Issue 41: a tampered lab state file was shown escaped, yet acted on:
/// `lab exec` entered the namespace it named and joined its cgroup. Now
/// nothing acts on a file that names what its lab does not own; the error
/// names the file, escaped, and says how to remove the lab.
#[test]
fn a_tampered_lab_state_file_is_shown_but_not_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = tampered_state();
    state["name"] = "evil".into();
    state["hosts"][0]["name"] = "a".into();
    state["links"][0]["ends"][0]["host"] = "a".into();
    std::fs::write(dir.path().join("evil.json"), serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let limit = std::time::Duration::from_secs(60);
    for args in [
        &["lab", "exec", "evil", "a", "--", "true"][..],
        &["lab", "set", "evil", "--mtu", "1400"][..],
    ] {
        let out = nicbench_in_lab_dir(dir.path(), args, limit);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert_no_raw_controls(&format!("{args:?}"), "stdout", &out.stdout);
        assert_no_raw_controls(&format!("{args:?}"), "stderr", &out.stderr);
        let err = stderr(&out);
        assert!(
            err.contains(&dir.path().join("evil.json").display().to_string())
                && err.contains("host a names the namespace")
                && err.contains("lab down"),
            "{args:?}: {err}"
        );
    }
    // Still shown, so that it can be seen.
    let out = nicbench_in_lab_dir(dir.path(), &["lab", "status", "evil"], limit);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
