//! `nicbench run PLAN.toml`: plans run end to end against an agent on
//! loopback, are stopped mid-case and resumed, record failed cases and go
//! on, and refuse bad plans with the line and what is allowed. What a
//! plan keeps in the store (its runs, its plan-run records, resume) is
//! checked on SQLite and on PostgreSQL alike.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::{clean_env, nicbench, stderr, AgentProcess, Lines, BIN, COMMAND_LIMIT};

pub(crate) fn write_plan(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path.display().to_string()
}

fn tcp_plan(port: u16, extra: &str) -> String {
    format!(
        "name = \"resume-test\"\n[defaults]\nduration = \"0.5s\"\n\n[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:{port}\"\n\n\
         [matrix]\nworkload = [\"tcp\"]\nstreams = [1, 2]\ndirection = [\"forward\", \"reverse\"]\n{extra}\n\
         [[report.tables]]\ntitle = \"Receiver throughput\"\nrows = \"tag:direction\"\ncols = \"tag:streams\"\n"
    )
}

/// A loopback port nothing listens on: bound, noted, closed.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `nicbench ARGS` in the working directory `cwd`, whose `nicbench/`
/// stands for the user's data directory. A plan run's files go to the plans
/// directory beside the database's file (`plan::plans_dir`); for a
/// PostgreSQL URL, beside the default local database in the data
/// directory: each half of a store test keeps them in a directory of its
/// own, and nothing reaches the home directory.
fn nicbench_in(cwd: &Path, args: &[&str]) -> Output {
    let child = crate::common::spawn_captured(
        Command::new(BIN)
            .args(args)
            .current_dir(cwd)
            .env("XDG_DATA_HOME", cwd)
            .env("COLUMNS", "1000"),
        "nicbench",
    );
    crate::common::wait_output(child, COMMAND_LIMIT, &format!("nicbench {args:?}"))
}

/// Every run of plan `plan` in the database, as `export --format json`
/// gives them.
pub(crate) fn exported_runs(db: &str, plan: &str) -> Vec<serde_json::Value> {
    let out = nicbench(&[
        "export",
        "--db",
        db,
        "--tag",
        &format!("plan={plan}"),
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    runs.as_array().expect("a list of runs").clone()
}

/// Complete runs of a plan in the database, by case tag.
fn complete_cases(db: &str, plan: &str) -> Vec<(String, i64)> {
    let mut cases: Vec<(String, i64)> = exported_runs(db, plan)
        .iter()
        .filter(|r| r["complete"] == true)
        .map(|r| {
            (
                r["tags"]["case"].as_str().unwrap().to_string(),
                r["id"].as_i64().unwrap(),
            )
        })
        .collect();
    cases.sort();
    cases
}

#[test]
fn a_plan_stopped_mid_case_resumes_without_redoing_finished_cases() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), "p.toml", &tcp_plan(agent.port, ""));
    crate::postgres::on_each_backend(|db| {
        let work = tempfile::tempdir().unwrap();

        // First invocation: stopped with SIGINT while the second case runs.
        let mark = agent.log_mark();
        let mut child = clean_env(&mut Command::new(BIN))
            .args(["run", &plan, "--db", db, "--no-shuffle"])
            .current_dir(work.path())
            .env("XDG_DATA_HOME", work.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = Lines::collect(child.stderr.take().unwrap());
        let out = Lines::collect(child.stdout.take().unwrap());
        err.wait_for(0, "[1/4] tcp", COMMAND_LIMIT).unwrap();
        // One test per case: the second case runs once the agent has logged a
        // second test since the plan started (it may already have by the time
        // the first case's line is read here). SIGINT then.
        let first_test = mark
            + agent
                .wait_for_log_after(mark, "running tcp test")
                .lines()
                .skip(mark)
                .position(|l| l.contains("running tcp test"))
                .expect("wait_for_log_after returned with the line");
        agent.wait_for_log_after(first_test + 1, "running tcp test");
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let status = child.wait().unwrap();
        // The reader threads may not have drained the pipes yet: wait for the
        // hint line (or the pipe's end) instead of reading what is there now.
        let _ = err.wait_for(0, "run `nicbench run", COMMAND_LIMIT);
        let _ = out.wait_for(0, "\0", COMMAND_LIMIT); // returns when stdout closes
        let (stdout, stderr_text) = (out.text(), err.text());
        assert_eq!(status.code(), Some(6), "stdout:\n{stdout}\nstderr:\n{stderr_text}");
        assert!(stderr_text.contains("run `nicbench run"), "{stderr_text}");
        let first = complete_cases(db, "resume-test");
        assert!(
            (1..4).contains(&first.len()),
            "stopped mid-plan: some but not all cases are complete: {first:?}"
        );

        // Second invocation: resumes, skips what finished, redoes the rest.
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db, "--no-shuffle"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}\n{}", stderr(&out));
        assert!(text.contains("(resumed)"), "{text}");
        assert!(
            text.contains(&format!("{} finished earlier and skipped", first.len())),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "4 of 4 cases done ({} measured now, {} earlier)",
                4 - first.len(),
                first.len()
            )),
            "{text}"
        );
        assert!(text.contains("Receiver throughput"), "the report table: {text}");
        // The HTML report of exactly this plan run, beside its summary: the
        // four complete runs and the one cut short (shown as such).
        let report = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("wrote the report of 5 runs")
                    .and_then(|r| r.rsplit(" to ").next())
            })
            .unwrap_or_else(|| panic!("no report line: {text}"));
        let html = std::fs::read_to_string(work.path().join(report)).unwrap();
        assert!(html.contains("<svg") && html.contains("plan_run"), "{report}");
        let second = complete_cases(db, "resume-test");
        assert_eq!(second.len(), 4, "every case once: {second:?}");
        for done in &first {
            assert!(
                second.contains(done),
                "a finished case was measured again: {done:?} in {second:?}"
            );
        }

        // Third invocation: nothing left; --restart measures everything again.
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("4 finished earlier and skipped"));
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db, "--restart", "--seed", "7"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            text.contains("4 of 4 cases done (4 measured now, 0 earlier)") && text.contains("seed 7"),
            "{text}"
        );
        assert_eq!(complete_cases(db, "resume-test").len(), 8);
    });
}

/// A second Ctrl-C ends the case in flight at once, and the plan still
/// stops its monitors, writes its summary and ends with exit code 6, as
/// when a case was a child process the plan outlived (run in-process, the
/// second stop had ended the plan itself with 130: no summary, and the
/// monitor left running).
#[test]
fn a_second_stop_ends_the_case_at_once_and_the_plan_still_puts_things_back() {
    // An "agent" that says hello and then never answers the test request:
    // the case waits for it (15 s), whatever the first stop says.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (answered, hello_sent) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let hello = nicbench::protocol::framing::encode(&nicbench::protocol::Message::Hello(
            nicbench::protocol::Hello::ours(nicbench::workload::names()),
        ));
        let mut held = Vec::new();
        for mut connection in silent.incoming().flatten() {
            let _ = connection.write_all(&hello);
            held.push(connection);
            let _ = answered.send(());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let pid_file = dir.path().join("monitor.pid");
    let plan = write_plan(
        dir.path(),
        "s.toml",
        &format!(
            "name = \"second-stop\"\n[defaults]\nduration = \"0.5s\"\n\
             [[agents]]\nlabel = \"silent\"\naddress = \"127.0.0.1:{port}\"\n[matrix]\nworkload = [\"tcp\"]\n\
             [[commands]]\nwhen = \"alongside\"\nrun = [\"sh\", \"-c\", \"echo $$ > {}; exec sleep 300\"]\n",
            pid_file.display()
        ),
    );
    let mut child = crate::common::spawn_captured(Command::new(BIN).args(["run", &plan, "--db", &db]), "nicbench run");
    // Its stderr as it comes, to see the first stop taken.
    let pipe = child.stderr.take().unwrap();
    let (taken, first_taken) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(pipe)).map_while(Result::ok) {
            if line.contains("signal received") {
                let _ = taken.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // The case is in flight once the agent said hello.
    hello_sent
        .recv_timeout(COMMAND_LIMIT)
        .expect("the case never connected");
    // Two stops from two senders (one sender's twice within a second is
    // the same stop delivered again, as `timeout` does). The second only
    // once the first was taken: two SIGINTs sent back to back to a process
    // that has not run in between arrive as one (a pending signal is not
    // queued twice), which on a busy machine made this one stop.
    let stop = || {
        let sent = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    stop();
    first_taken
        .recv_timeout(COMMAND_LIMIT)
        .expect("the first stop was never taken");
    stop();
    let out = crate::common::wait_output(child, COMMAND_LIMIT, "nicbench run");
    let err = reader.join().unwrap();
    let monitor = std::fs::read_to_string(&pid_file).unwrap_or_default();
    let monitor_alive =
        !monitor.trim().is_empty() && std::path::Path::new(&format!("/proc/{}", monitor.trim())).exists();
    if monitor_alive {
        let _ = Command::new("kill").arg(monitor.trim()).status();
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(6), "{text}\n{err}");
    assert!(!monitor_alive, "the monitor (pid {}) was left running", monitor.trim());
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .unwrap_or_else(|| panic!("no summary: {text}"));
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(summary).unwrap()).unwrap();
    assert_eq!(summary["cases"][0]["status"], "interrupted", "{summary}");
    assert!(err.contains("run `nicbench run"), "{err}");
}

#[test]
fn a_failing_case_is_recorded_with_its_reason_and_the_plan_goes_on() {
    let agent = AgentProcess::start(&[]);
    let closed = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "f.toml",
        &format!(
            "[defaults]\nduration = \"0.3s\"\n[[agents]]\nlabel = \"good\"\naddress = \"127.0.0.1:{}\"\n\
             [[agents]]\nlabel = \"gone\"\naddress = \"127.0.0.1:{closed}\"\n\
             [matrix]\nworkload = [\"tcp\"]\n\
             [[commands]]\nwhen = \"before\"\nrun = [\"sh\", \"-c\", \"echo before-the-case\"]\n\
             [[commands]]\nwhen = \"alongside\"\nrun = [\"sh\", \"-c\", \"echo watching; sleep 30\"]\n",
            agent.port
        ),
    );
    let out = nicbench(&["run", &plan, "--db", &db]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("1 of 2 cases done") && text.contains("1 failed"),
        "{text}"
    );
    assert!(text.contains("FAILED tcp agent=gone"), "{text}");
    assert!(
        text.contains("refused") || text.contains("cannot connect"),
        "the reason: {text}"
    );
    let summary = text
        .lines()
        .find_map(|l| l.strip_prefix("summary: "))
        .expect("the summary file");
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(summary).unwrap()).unwrap();
    let cases = summary["cases"].as_array().unwrap();
    let failed = cases.iter().find(|c| c["status"] == "failed").unwrap();
    assert_eq!(failed["exit_code"], 3, "agent unreachable: {failed}");
    let measured = cases.iter().find(|c| c["status"] == "measured").unwrap();
    assert!(measured["run_id"].as_i64().is_some(), "{measured}");
    // The commands' output is kept beside the summary.
    let files: Vec<String> = measured["command_output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| std::fs::read_to_string(f.as_str().unwrap()).unwrap())
        .collect();
    assert!(files.iter().any(|f| f.contains("before-the-case")), "{files:?}");
    assert!(files.iter().any(|f| f.contains("watching")), "{files:?}");
}

#[test]
fn an_essential_command_that_fails_fails_its_case() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "e.toml",
        &format!(
            "[defaults]\nduration = \"0.3s\"\n[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:{}\"\n\
             [matrix]\nworkload = [\"tcp\"]\n\
             [[commands]]\nwhen = \"after\"\nrun = [\"sh\", \"-c\", \"echo no counters; exit 3\"]\nessential = true\n",
            agent.port
        ),
    );
    let out = nicbench(&["run", &plan, "--db", &db]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(
        text.contains("essential after command") && text.contains("exit status: 3"),
        "{text}"
    );
}

#[test]
fn the_dry_run_lists_every_case_and_checks_the_agents_without_traffic() {
    let agent = AgentProcess::start(&[]);
    let closed = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(dir.path(), "d.toml", &tcp_plan(agent.port, ""));
    let mark = agent.log_mark();
    let out = nicbench(&["run", &plan, "--db", &db, "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    for line in [
        format!("nicbench tcp 127.0.0.1:{} -t 0.5s -P 1", agent.port),
        format!("nicbench tcp 127.0.0.1:{} -t 0.5s -R -P 2", agent.port),
        "estimated time:".into(),
        format!("agent lo (127.0.0.1:{}): nicbench", agent.port),
    ] {
        assert!(text.contains(&line), "missing '{line}' in:\n{text}");
    }
    assert!(
        !agent.logs().lines().skip(mark).any(|l| l.contains("test ")),
        "no test ran: {}",
        agent.logs()
    );
    assert!(!std::path::Path::new(&db).exists(), "a dry run saves nothing");

    let unreachable = write_plan(dir.path(), "u.toml", &tcp_plan(closed, ""));
    let out = nicbench(&["run", &unreachable, "--db", &db, "--dry-run"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        stderr(&out).contains("the dry run found an agent the plan cannot use"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_plans_are_refused_with_the_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "bad.toml",
        "[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:1\"\n[matrix]\nworkload = [\"tcp\"]\nmtus = [9000]\n",
    );
    let out = nicbench(&["run", &plan, "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("bad.toml: line 6") && e.contains("unknown field `mtus`"),
        "{e}"
    );

    let invalid = write_plan(
        dir.path(),
        "cells.toml",
        "[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:1\"\n[matrix]\nworkload = [\"rr\", \"tcp\"]\ndirection = [\"bidir\"]\n",
    );
    let out = nicbench(&["run", &invalid, "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    // The head, a line per invalid case, the hint: real line breaks, never
    // an escaped "\n" (the case list is nicbench's own text).
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 3, "{e}");
    assert!(
        lines[0].starts_with("nicbench: error: ")
            && lines[0].ends_with("cells.toml: 1 of 2 cases are not valid command lines:"),
        "{e}"
    );
    assert!(lines[1].starts_with("  rr agent=lo direction=bidir: "), "{e}");
    assert!(lines[2].contains("[[matrix.exclude]]"), "{e}");
    assert!(!e.contains("\\n"), "{e}");

    let out = nicbench(&["run", &dir.path().join("missing.toml").display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read the plan"), "{}", stderr(&out));
}

#[test]
fn mtu_cases_set_both_ends_restore_them_and_an_agent_that_does_not_allow_it_is_reported() {
    require_lab!();
    let lab = crate::common::lab_builder().no_agents().mtu(9000).build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "a key of at least sixteen bytes, for the plan test\n").unwrap();
    let psk = psk.display().to_string();
    let b = lab.addr("b").to_string();
    let allowing = AgentProcess::start_with(lab.command("b", BIN), &b, &["--psk-file", &psk, "--allow-host-changes"]);
    let plain = AgentProcess::start_with(lab.command("b", BIN), &b, &["--psk-file", &psk]);
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "mtu.toml",
        &format!(
            "name = \"mtu-test\"\n[defaults]\nduration = \"0.3s\"\nallow_host_changes = true\n\
             [[agents]]\nlabel = \"allows\"\naddress = \"{b}:{}\"\npsk_file = \"{psk}\"\n\
             [[agents]]\nlabel = \"refuses\"\naddress = \"{b}:{}\"\npsk_file = \"{psk}\"\n\
             [matrix]\nworkload = [\"tcp\"]\nmtu = [1500, 4000]\n\
             [[report.tables]]\nrows = \"tag:agent\"\ncols = \"tag:mtu\"\n",
            allowing.port, plain.port
        ),
    );
    let mut run = lab.command("a", BIN);
    run.args(["run", &plan, "--db", &db, "--no-shuffle"]);
    let out = crate::common::run_captured(&mut run, "nicbench run in the lab");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}\n{}", stderr(&out));
    // In the file's order: allows/1500, allows/4000, refuses/1500 (b's
    // interface is at 4000 then, and this agent may not change it: the case
    // fails and the plan goes on), refuses/4000 (already so: it runs).
    assert!(
        text.contains("3 of 4 cases done") && text.contains("1 failed"),
        "{text}"
    );
    assert!(
        text.contains(
            "FAILED tcp agent=refuses mtu=1500: agent refuses: cannot set MTU 1500: the agent refused: \
                       this agent does not change host settings: start it with --allow-host-changes"
        ),
        "{text}"
    );
    assert!(!text.contains("NOT RESTORED"), "{text}");
    // Both ends are back at the lab's MTU.
    assert_eq!(lab.kernel_link(1, "a").unwrap().mtu, 9000);
    assert_eq!(lab.kernel_link(1, "b").unwrap().mtu, 9000);
    // Each measured case ran at its MTU on both ends (the facts recorded with the run).
    let out = nicbench(&["export", "--db", &db, "--tag", "plan=mtu-test", "--format", "json"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:#?}");
    for r in runs {
        let mtu: u64 = r["tags"]["mtu"].as_str().unwrap().parse().unwrap();
        let id = r["id"].as_i64().unwrap().to_string();
        let doc = crate::common::nicbench_json(&["show", &id, "--db", &db, "--json"]);
        assert_eq!(
            doc["client"]["facts"]["interface"]["mtu_bytes"], mtu,
            "client side of run {id}"
        );
        assert_eq!(
            doc["agent"]["facts"]["interface"]["mtu_bytes"], mtu,
            "agent side of run {id}"
        );
    }
    assert!(!dir
        .path()
        .join("plans")
        .read_dir()
        .unwrap()
        .any(|d| d.unwrap().path().join("restore.json").exists()));
}

/// The dry run of a plan that holds `text` after its agent; exit code 2
/// and the message are asserted by the caller.
fn dry_run_of(dir: &std::path::Path, file: &str, head: &str, tail: &str) -> std::process::Output {
    let plan = write_plan(
        dir,
        file,
        &format!(
            "{head}\n[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:1\"\n[matrix]\nworkload = [\"tcp\"]\n{tail}"
        ),
    );
    nicbench(&["run", &plan, "--dry-run"])
}

#[test]
fn plan_names_that_are_not_one_file_name_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let long = "n".repeat(101);
    for (name, reason) in [
        ("../../../tmp/x", "'/'"),
        ("/tmp/x", "'/'"),
        ("a..b", "'..'"),
        (".hidden", "starts with '.'"),
        ("bell\\u0007", "control character"),
        (long.as_str(), "101 bytes long, more than 100"),
    ] {
        let out = dry_run_of(dir.path(), "p.toml", &format!("name = \"{name}\""), "");
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains("name = ") && e.contains(reason), "{name}: {e}");
        assert!(e.contains("names files in the plans directory"), "{e}");
    }
    // The default name is the file's: a hidden file's is refused too.
    let out = dry_run_of(dir.path(), ".dot.toml", "", "");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("starts with '.'"), "{}", stderr(&out));
}

#[test]
fn options_the_runner_owns_are_refused_in_a_plan_naming_the_option_and_why() {
    let dir = tempfile::tempdir().unwrap();
    for (section, option, why) in [
        ("[defaults]\noptions = [\"--no-save\"]", "--no-save", "measured again"),
        (
            "[defaults]\noptions = [\"--db\", \"/tmp/x.db\"]",
            "--db",
            "its own --db",
        ),
        (
            "[defaults]\noptions = [\"--db=/tmp/x.db\"]",
            "--db=/tmp/x.db",
            "its own --db",
        ),
        ("[workloads.tcp]\noptions = [\"--json\"]", "--json", "--json-stream"),
        (
            "[workloads.tcp]\noptions = [\"--tag\", \"plan=other\"]",
            "--tag plan=other",
            "sets the tag 'plan'",
        ),
    ] {
        let out = dry_run_of(dir.path(), "owned.toml", section, "");
        assert_eq!(out.status.code(), Some(2), "{option}: {}", stderr(&out));
        let e = stderr(&out);
        assert!(
            e.contains(&format!("\"{option}\" is not allowed")) && e.contains(why),
            "{option}: {e}"
        );
    }
    let out = dry_run_of(
        dir.path(),
        "vary.toml",
        "",
        "[matrix.vary.save]\noff = [\"--no-save\"]\n",
    );
    assert!(
        stderr(&out).contains("[matrix.vary.save] off: \"--no-save\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_matrix_over_100000_cases_is_refused_with_its_size_and_axes_before_expanding() {
    let dir = tempfile::tempdir().unwrap();
    let values = |n: usize| -> String { (0..n).map(|i| format!("v{i} = []")).collect::<Vec<_>>().join("\n") };
    let tail = format!(
        "streams = [1, 2, 4, 8]\n[matrix.vary.a]\n{}\n[matrix.vary.b]\n{}\n",
        values(160),
        values(160)
    );
    let out = dry_run_of(dir.path(), "huge.toml", "", &tail);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("the matrix has 102400 cases (streams 4 x a 160 x b 160), more than 100000"),
        "{e}"
    );
}

/// The plan run a plan's output names: "plan NAME, run RUN...".
fn plan_run_of(text: &str) -> String {
    text.lines()
        .find_map(|l| l.split(", run ").nth(1))
        .and_then(|r| r.split([':', ' ']).next())
        .unwrap_or_else(|| panic!("no plan run in:\n{text}"))
        .to_string()
}

#[test]
fn a_changed_plan_with_the_same_name_starts_a_new_plan_run_and_says_what_changed() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    crate::postgres::on_each_backend(|db| {
        let work = tempfile::tempdir().unwrap();
        let head = format!(
        "name = \"same\"\n[defaults]\nduration = \"0.3s\"\n[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:{}\"\n\
         [matrix]\nworkload = [\"tcp\"]\n",
        agent.port
    );
        let plan = write_plan(dir.path(), "p.toml", &head);
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text}\n{}", stderr(&out));
        let first_run = plan_run_of(&text);

        // The same plan, its axis values in another order: resumed.
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db, "--dry-run"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(text.contains(&format!("resumes plan run {first_run}")), "{text}");

        // Another matrix under the same name: a new plan run, and why.
        let plan = write_plan(dir.path(), "p.toml", &format!("{head}streams = [2, 1]\n"));
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text}\n{}", stderr(&out));
        assert!(
        text.contains(&format!(
            "the plan changed since plan run {first_run} (the matrix changed: streams axis added): a new plan run starts"
        )),
        "{text}"
    );
        assert!(!text.contains("(resumed)"), "{text}");
        let second_run = plan_run_of(&text.lines().skip(1).collect::<Vec<_>>().join("\n"));
        assert_ne!(second_run, first_run);
        assert!(text.contains("2 of 2 cases done (2 measured now, 0 earlier)"), "{text}");

        // --resume names the old one: resumed with this plan, which says so.
        let out = nicbench_in(
            work.path(),
            &["run", &plan, "--db", db, "--resume", &first_run, "--dry-run"],
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text}\n{}", stderr(&out));
        assert!(
            text.contains(&format!(
                "resuming plan run {first_run} as asked, although the plan changed"
            )),
            "{text}"
        );
        assert!(text.contains(&format!("resumes plan run {first_run}")), "{text}");
        // A plan run of no run of this plan is refused, naming the plan's.
        let out = nicbench_in(
            work.path(),
            &[
                "run",
                &plan,
                "--db",
                db,
                "--resume",
                "20000101-000000-0000",
                "--dry-run",
            ],
        );
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("no plan run 20000101-000000-0000 of the plan 'same'")
                && stderr(&out).contains(&second_run),
            "{}",
            stderr(&out)
        );

        // A plan run without a record (an older nicbench): not resumed, said.
        crate::postgres::Inside::open(db).execute("DELETE FROM plan_runs");
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db, "--dry-run"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            text.contains(&format!(
                "plan run {second_run} was started by a nicbench that did not record what a plan run measures"
            )) && !text.contains("resumes plan run"),
            "{text}"
        );
    });
}

/// Issue 67: a plan-run id from the database named a directory as it was:
/// `../../../../tmp/x` planted in a database was resumed and the summary
/// written to `/tmp/x/summary.json`. Here the planted id leads from the
/// plans directory to `escaped` beside the database's directory; the plan
/// is refused, naming the id, and nothing is written there.
#[test]
fn a_plan_run_id_planted_in_the_database_is_refused_and_names_no_directory() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a")).unwrap();
    let sqlite = dir.path().join("a/r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "p.toml",
        &format!(
            "name = \"planted\"\n[defaults]\nduration = \"0.3s\"\n[[agents]]\nlabel = \"lo\"\n\
             address = \"127.0.0.1:{}\"\n[matrix]\nworkload = [\"tcp\"]\n",
            agent.port
        ),
    );
    // The SQLite file in DIR/a, so that the planted id's way out leads
    // into this test's DIR; then a PostgreSQL database.
    let body = |db: &str| {
        let work = tempfile::tempdir().unwrap();
        // nicbench_in makes WORK the data directory: a PostgreSQL URL's
        // plans are in WORK/nicbench/plans.
        let plans = match crate::postgres::is_postgres(db) {
            true => work.path().join("nicbench").join("plans"),
            false => nicbench::plan::plans_dir(Path::new(db)),
        };
        let escaped = plans.parent().unwrap().parent().unwrap().join("escaped");
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        // PLANS/planted-x/../../../escaped is PLANS/../../escaped (DIR/escaped
        // for the SQLite file DIR/a/r.db).
        let planted = "x/../../../escaped";
        let mut inside = crate::postgres::Inside::open(db);
        inside.execute(&format!("UPDATE plan_runs SET plan_run = '{planted}'"));
        inside.execute(&format!("UPDATE tags SET value = '{planted}' WHERE key = 'plan_run'"));
        drop(inside);
        for extra in [&[][..], &["--dry-run"][..]] {
            let mut args = vec!["run", plan.as_str(), "--db", db];
            args.extend_from_slice(extra);
            let out = nicbench_in(work.path(), &args);
            let err = stderr(&out);
            assert!(!out.status.success(), "{extra:?}: {err}");
            assert!(
                err.contains(&format!(
                    "names plan run \"{planted}\" of the plan 'planted', which is not a plan-run id"
                )) && err.contains("--restart"),
                "{extra:?}: {err}"
            );
        }
        assert!(!escaped.exists(), "nothing written outside the plans directory");
        // --resume with such an id is refused before the database is read.
        let out = nicbench_in(
            work.path(),
            &["run", &plan, "--db", db, "--resume", "../../x", "--dry-run"],
        );
        assert!(
            stderr(&out).contains("--resume \"../../x\": not a plan-run id"),
            "{}",
            stderr(&out)
        );
        // --restart starts a plan run of its own, under the plans directory.
        let out = nicbench_in(work.path(), &["run", &plan, "--db", db, "--restart"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!escaped.exists());
    };
    body(&sqlite);
    crate::postgres::on_postgres(body);
}

/// `nicbench ARGS` with `$NICBENCH_PORT` set, as `lab exec` sets it.
fn nicbench_with_port_env(port: u16, args: &[&str]) -> std::process::Output {
    clean_env(&mut Command::new(BIN))
        .args(args)
        .env("NICBENCH_PORT", port.to_string())
        .env("COLUMNS", "1000")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_port_of_an_address_or_of_options_reaches_the_agent_whatever_the_default_port() {
    let agent = AgentProcess::start(&[]);
    let closed = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    for (file, address, options) in [
        ("in-address.toml", format!("127.0.0.1:{}", agent.port), String::new()),
        (
            "in-options.toml",
            "127.0.0.1".to_string(),
            format!("options = [\"-p\", \"{}\"]\n", agent.port),
        ),
    ] {
        let plan = write_plan(
            dir.path(),
            file,
            &format!(
                "[defaults]\nduration = \"0.3s\"\n{options}[[agents]]\nlabel = \"lo\"\naddress = \"{address}\"\n\
                 [matrix]\nworkload = [\"tcp\"]\n"
            ),
        );
        // The lab's default port names another port: the plan's wins.
        let out = nicbench_with_port_env(closed, &["run", &plan, "--db", &db]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{file}: {text}\n{}", stderr(&out));
        assert!(text.contains("1 of 1 cases done (1 measured now"), "{file}: {text}");
        let out = nicbench_with_port_env(closed, &["run", &plan, "--db", &db, "--dry-run", "--restart"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("nicbench tcp 127.0.0.1:{} ", agent.port))
                && text.contains(&format!("agent lo (127.0.0.1:{}): nicbench", agent.port)),
            "{file}: {text}"
        );
    }
    // An address's port and a -p that differ: refused before anything runs.
    let plan = write_plan(
        dir.path(),
        "both.toml",
        &format!(
            "[defaults]\noptions = [\"-p\", \"{closed}\"]\n[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:{}\"\n\
             [matrix]\nworkload = [\"tcp\"]\n",
            agent.port
        ),
    );
    let out = nicbench(&["run", &plan, "--db", &db, "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("both.toml")
            && e.contains(&format!(
                "agent lo: its address \"127.0.0.1:{}\" names port {}, but the options give -p {closed}",
                agent.port, agent.port
            )),
        "{e}"
    );
}

#[test]
fn the_dry_run_names_an_agent_that_would_refuse_the_host_changes_of_the_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "a key of at least sixteen bytes, for the plan test\n").unwrap();
    let psk = psk.display().to_string();
    let plain = AgentProcess::start(&["--psk-file", &psk]);
    let allowing = AgentProcess::start(&["--psk-file", &psk, "--allow-host-changes"]);
    let plan = |port: u16, key: bool| {
        format!(
            "[defaults]\nallow_host_changes = true\n[[agents]]\nlabel = \"b\"\naddress = \"127.0.0.1:{port}\"\n{}\
             [matrix]\nworkload = [\"tcp\"]\nmtu = [9000]\n",
            if key {
                format!("psk_file = \"{psk}\"\n")
            } else {
                String::new()
            }
        )
    };
    let db = dir.path().join("r.db").display().to_string();
    let dry_run = |name: &str, text: String| {
        let file = write_plan(dir.path(), name, &text);
        nicbench(&["run", &file, "--db", &db, "--dry-run"])
    };
    let out = dry_run("refuses.toml", plan(plain.port, true));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "agent b (127.0.0.1:{}): the matrix sets MTU 9000 on agent b, which refuses host changes",
            plain.port
        )) && text.contains("restart it with `nicbench serve --allow-host-changes --psk-file FILE`"),
        "{text}"
    );
    // Without the key the agent is not even reached: said as such.
    let out = dry_run("keyless.toml", plan(allowing.port, false));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("needs a pre-shared key; pass --psk-file"), "{text}");
    // An agent without a key cannot allow host changes.
    let keyless = AgentProcess::start(&[]);
    let out = dry_run("no-key.toml", plan(keyless.port, false));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("which refuses host changes"), "{text}");
    let out = dry_run("accepts.toml", plan(allowing.port, true));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(text.contains("authenticated, accepts host changes"), "{text}");
}

/// Starts an agent in lab host b from `agent_command` (allowing host
/// changes) and runs, from host a, a plan `name` of tcp cases at the MTUs
/// `mtus` ("1500, 9000") against it; the run's output and the agent.
fn run_mtu_plan_from_a(
    lab: &nicbench::lab::Lab,
    agent_command: std::process::Command,
    name: &str,
    mtus: &str,
) -> (std::process::Output, AgentProcess) {
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "a key of at least sixteen bytes, for the plan test\n").unwrap();
    let psk = psk.display().to_string();
    let b = lab.addr("b").to_string();
    let agent = AgentProcess::start_with(agent_command, &b, &["--psk-file", &psk, "--allow-host-changes"]);
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        &format!("{name}.toml"),
        &format!(
            "name = \"{name}\"\n[defaults]\nduration = \"0.3s\"\nallow_host_changes = true\n\
             [[agents]]\nlabel = \"b\"\naddress = \"{b}:{}\"\npsk_file = \"{psk}\"\n\
             [matrix]\nworkload = [\"tcp\"]\nmtu = [{mtus}]\n",
            agent.port
        ),
    );
    let mut run = lab.command("a", BIN);
    run.args(["run", &plan, "--db", &db, "--no-shuffle"]);
    (crate::common::run_captured(&mut run, "nicbench run in the lab"), agent)
}

#[test]
fn an_mtu_the_router_does_not_pass_fails_its_case_as_a_black_hole_before_it_runs() {
    require_lab!();
    // a and b go to 9000; the router between them stays at 1500.
    let lab = crate::common::lab_builder().via_router().no_agents().build().unwrap();
    // An agent that does not know it is in a lab (as on a host whose router
    // nicbench cannot reach): the router does not follow its MTU.
    let mut agent_command = lab.command("b", BIN);
    agent_command
        .env_remove(nicbench::lab_env::LAB_VAR)
        .env_remove(nicbench::lab_env::PATHS_VAR);
    let (out, _agent) = run_mtu_plan_from_a(&lab, agent_command, "hole", "1500, 9000");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("1 of 2 cases done") && text.contains("1 failed"),
        "{text}"
    );
    assert!(
        text.contains(
            "FAILED tcp agent=b mtu=9000: path to b does not pass 9000-byte packets: largest that passed 1500"
        ),
        "{text}"
    );
    assert!(!text.contains("did not finish"), "the case did not run: {text}");
    // Both ends back at 1500 (a on link 1 to the router, b on link 2).
    assert_eq!(lab.kernel_link(1, "a").unwrap().mtu, 1500);
    assert_eq!(lab.kernel_link(2, "b").unwrap().mtu, 1500);
}

#[test]
fn an_agent_in_a_router_lab_takes_the_router_links_to_the_plan_mtu_and_back() {
    require_lab!();
    // a -> r -> b, shaped at the router; a and b go to 9000 for a case and
    // the router's links toward both follow, through b's agent.
    let lab = crate::common::lab_builder()
        .via_router()
        .rate(100_000_000)
        .no_agents()
        .build()
        .unwrap();
    let (out, agent) = run_mtu_plan_from_a(&lab, lab.command("b", BIN), "follow", "9000");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}\n{}", stderr(&out), agent.logs());
    assert!(
        text.contains("1 of 1 cases done (1 measured now, 0 earlier), 0 failed"),
        "{text}"
    );
    // The agent said what it did to the router, and set it back.
    let logs = agent.logs();
    let toward_b = lab.state().links[1].end_of("r").unwrap().ifname.clone();
    let toward_a = lab.state().links[0].end_of("r").unwrap().ifname.clone();
    for (iface, mtu) in [
        (&toward_b, 9000),
        (&toward_a, 9000),
        (&toward_b, 1500),
        (&toward_a, 1500),
    ] {
        let said = format!("{iface}: MTU {mtu}");
        assert!(logs.contains(&said), "{said}: {logs}");
    }
    // Everything back at 1500, the router's shaping as it was.
    for (link, host) in [(1, "a"), (1, "r"), (2, "r"), (2, "b")] {
        let now = lab.kernel_link(link, host).unwrap();
        assert_eq!(now.mtu, 1500, "link {link} in {host}");
        if host == "r" {
            assert_eq!(now.tbf_bits_per_second, Some(100_000_000), "link {link}");
        }
    }
}

/// The router's tbf latency (tc's `lat`, in seconds) on `iface`, from
/// `tc -j qdisc show` output as a plan command saved it.
fn tbf_latency_in(saved: &str, iface: &str) -> Option<f64> {
    let json = saved.lines().find(|l| l.starts_with('['))?;
    let qdiscs: serde_json::Value = serde_json::from_str(json).ok()?;
    qdiscs
        .as_array()?
        .iter()
        .find(|q| q["kind"] == "tbf" && q["dev"] == iface)
        .and_then(|q| q["options"]["lat"].as_f64())
        .map(|us| us / 1e6)
}

/// The queue axis: a plan run inside a lab (`lab exec` style) measures
/// `loaded` behind the router with a 5 ms and a 200 ms queue. Each case's
/// run is tagged with its queue; a command before each case reads the
/// router's tbf from the kernel and finds the case's queue set; after the
/// plan the router's queue is back at what the lab had.
#[test]
fn a_queue_axis_sets_the_lab_routers_queue_around_each_case_and_puts_it_back() {
    require_lab!();
    let lab = crate::common::lab_builder()
        .via_router()
        .rate(100_000_000)
        .no_agents()
        .build()
        .unwrap();
    let before: Vec<Option<f64>> = [1, 2]
        .iter()
        .map(|&l| lab.kernel_link(l, "r").unwrap().tbf_queue_seconds)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let b = lab.addr("b").to_string();
    let agent = AgentProcess::start_with(lab.command("b", BIN), &b, &[]);
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "queues.toml",
        &format!(
            "name = \"queues\"\n[defaults]\nduration = \"1s\"\n\
             [[agents]]\nlabel = \"b\"\naddress = \"{b}:{}\"\n\
             [workloads.loaded]\noptions = [\"--phases\", \"download\", \"--idle\", \"1s\", \"-P\", \"1\"]\n\
             [matrix]\nworkload = [\"loaded\"]\nqueue = [\"5ms\", \"200ms\"]\n\
             [[commands]]\nwhen = \"before\"\nrun = [\"tc\", \"-n\", \"{}\", \"-j\", \"qdisc\", \"show\"]\n",
            agent.port,
            lab.netns("r")
        ),
    );
    let mut run = lab.command("a", BIN);
    run.args(["run", &plan, "--db", &db, "--no-shuffle"]);
    let out = crate::common::run_captured(&mut run, "nicbench run in the lab");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}\n{}", stderr(&out), agent.logs());
    assert!(text.contains("2 of 2 cases done"), "{text}");
    // Each case's run carries its queue.
    assert_eq!(
        complete_cases(&db, "queues")
            .into_iter()
            .map(|(case, _)| case)
            .collect::<Vec<_>>(),
        ["loaded agent=b queue=200ms", "loaded agent=b queue=5ms"]
    );
    let out = nicbench(&["export", "--db", &db, "--tag", "plan=queues", "--format", "json"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in runs.as_array().unwrap() {
        let case = r["tags"]["case"].as_str().unwrap();
        assert!(
            case.ends_with(&format!("queue={}", r["tags"]["queue"].as_str().unwrap())),
            "{r}"
        );
    }
    // While each case ran, the router's queues were the case's (in the
    // file's order: 5 ms, then 200 ms), on both of its shaped egresses.
    let plans = dir.path().join("plans");
    let run_dir = plans.read_dir().unwrap().next().unwrap().unwrap().path();
    for (index, queue) in [(1, 0.005), (2, 0.2)] {
        let saved = std::fs::read_to_string(run_dir.join(format!("case{index:03}-before-1.txt"))).unwrap();
        for link in [1, 2] {
            let iface = &lab.state().links[link - 1].end_of("r").unwrap().ifname;
            let set = tbf_latency_in(&saved, iface).unwrap_or_else(|| panic!("no tbf on {iface}: {saved}"));
            assert!(
                (set - queue).abs() < 0.001,
                "case {index}, {iface}: {set} s, not {queue} s\n{saved}"
            );
        }
    }
    // And afterwards as the lab had them.
    let after: Vec<Option<f64>> = [1, 2]
        .iter()
        .map(|&l| lab.kernel_link(l, "r").unwrap().tbf_queue_seconds)
        .collect();
    assert_eq!(after, before);
    assert!(before
        .iter()
        .all(|q| q.is_some_and(|s| (s - 0.005).abs() > 0.001 && (s - 0.2).abs() > 0.001)));
}

/// Outside a lab, a plan with a queue axis is refused before anything
/// runs (the dry run too), saying how to run it.
#[test]
fn a_queue_axis_outside_a_lab_is_refused_naming_lab_exec() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "q.toml",
        "[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:1\"\n[matrix]\nworkload = [\"loaded\"]\nqueue = [\"5ms\"]\n",
    );
    let mut command = Command::new(BIN);
    clean_env(&mut command);
    command.env_remove("NICBENCH_LAB").env_remove("NICBENCH_LAB_PATHS");
    let out = command.args(["run", &plan, "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("[matrix] queue sets the queue of a lab's router") && e.contains("nicbench lab exec LAB HOST"),
        "{e}"
    );
    // A value the lab does not take is refused at load, with what it takes.
    let plan = write_plan(
        dir.path(),
        "bad.toml",
        "[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:1\"\n[matrix]\nworkload = [\"loaded\"]\nqueue = [\"200\"]\n",
    );
    let out = nicbench(&["run", &plan, "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("[matrix] queue = \"200\"") && e.contains("from 1ms to 10s"),
        "{e}"
    );
}

/// The lab axis: a plan run with `nicbench lab exec` has two cards in
/// turn on host b, one that slows the router's egress toward b and holds b
/// to 30% of a core, one that leaves the lab as built. A command before
/// each case reads the lab (`lab status --json`: its state and the
/// kernel's tbf) and finds the case's card in place; each run is tagged
/// with its card; after the plan the lab is as it was built, its rate in
/// the kernel and b's limit lifted (made through `lab set` in the mount
/// namespace `lab exec` ran in: `ip netns exec` hides /sys/fs/cgroup).
#[test]
fn a_lab_axis_changes_the_lab_around_each_case_and_puts_it_back() {
    require_lab!();
    let lab = crate::common::lab_builder()
        .via_router()
        .rate(100_000_000)
        .no_agents()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = lab.addr("b").to_string();
    let agent = AgentProcess::start_with(lab.command("b", BIN), &b, &[]);
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "cards.toml",
        &format!(
            "name = \"cards\"\n[defaults]\nduration = \"0.5s\"\n\
             [[agents]]\nlabel = \"b\"\naddress = \"{b}:{}\"\n\
             [matrix]\nworkload = [\"tcp\"]\n\
             [matrix.lab.card]\nslow = [\"--rate\", \"2=50mbit\", \"--cpu-limit\", \"b=30%\"]\nas-built = []\n\
             [[commands]]\nwhen = \"before\"\nrun = [\"{BIN}\", \"lab\", \"status\", \"{}\", \"--json\"]\n",
            agent.port,
            lab.name()
        ),
    );
    let mut run = Command::new(BIN);
    clean_env(&mut run).args([
        "lab",
        "exec",
        lab.name(),
        "a",
        "--",
        BIN,
        "run",
        &plan,
        "--db",
        &db,
        "--no-shuffle",
    ]);
    let out = crate::common::run_captured(&mut run, "nicbench run under lab exec");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}\n{}", stderr(&out), agent.logs());
    assert!(text.contains("2 of 2 cases done"), "{text}\n{}", stderr(&out));
    assert_eq!(
        complete_cases(&db, "cards")
            .into_iter()
            .map(|(case, _)| case)
            .collect::<Vec<_>>(),
        ["tcp agent=b card=as-built", "tcp agent=b card=slow"]
    );
    // While each case ran, the lab was the case's card (the file's order:
    // as-built, then slow).
    let plans = dir.path().join("plans");
    let run_dir = plans.read_dir().unwrap().next().unwrap().unwrap().path();
    let router_toward_b = |status: &serde_json::Value| {
        status["kernel"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["link"] == 2 && k["host"] == "r")
            .unwrap()["tbf_bits_per_second"]
            .as_u64()
    };
    let limit_of_b = |status: &serde_json::Value| {
        status["lab"]["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == "b")
            .unwrap()["cpu_limit_percent"]
            .as_f64()
    };
    for (index, rate, limit) in [(1, 100_000_000, None), (2, 50_000_000, Some(30.0))] {
        let saved = std::fs::read_to_string(run_dir.join(format!("case{index:03}-before-1.txt"))).unwrap();
        let json = &saved[saved.find('{').unwrap_or_else(|| panic!("no JSON: {saved}"))..];
        // The command's output: one JSON document, then the file's own lines.
        let status: serde_json::Value = serde_json::Deserializer::from_str(json)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no JSON: {saved}"))
            .unwrap_or_else(|e| panic!("{e}: {saved}"));
        assert_eq!(router_toward_b(&status), Some(rate), "case {index}: {saved}");
        assert_eq!(limit_of_b(&status), limit, "case {index}: {saved}");
    }
    // And afterwards as built: the kernel's rate, and no limit on b.
    assert_eq!(lab.kernel_link(2, "r").unwrap().tbf_bits_per_second, Some(100_000_000));
    let out = nicbench(&["lab", "status", lab.name(), "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(limit_of_b(&status), None, "{status}");
    assert_eq!(router_toward_b(&status), Some(100_000_000));
}

/// Outside a lab a plan with a lab axis is refused before anything runs
/// (the dry run too), saying how to run it; a value `lab set` would not
/// take is refused at load, naming the axis, the value and what it takes.
#[test]
fn a_lab_axis_outside_a_lab_or_with_a_bad_value_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let head = "[[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:1\"\n[matrix]\nworkload = [\"tcp\"]\n";
    let plan = write_plan(
        dir.path(),
        "l.toml",
        &format!("{head}[matrix.lab.card]\nslow = [\"--rate\", \"2=50mbit\"]\n"),
    );
    let mut command = Command::new(BIN);
    clean_env(&mut command);
    command.env_remove("NICBENCH_LAB").env_remove("NICBENCH_LAB_PATHS");
    let out = command.args(["run", &plan, "--dry-run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("[matrix.lab.card] changes the lab the plan runs in, and this is not a lab")
            && e.contains("nicbench lab exec LAB HOST"),
        "{e}"
    );
    for (value, expected) in [
        ("[\"--rate\", \"fast\"]", "[matrix.lab.card] slow: --rate fast:"),
        ("[\"--offloads\", \"tso=off\"]", "the plan's offloads axis"),
        (
            "[\"--hosts\", \"3\"]",
            "expected --rate, --queue, --mtu and --cpu-limit",
        ),
    ] {
        let plan = write_plan(
            dir.path(),
            "bad.toml",
            &format!("{head}[matrix.lab.card]\nslow = {value}\n"),
        );
        let out = nicbench(&["run", &plan, "--dry-run"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains(expected), "{value}: {e}");
    }
    // A lab axis may not take another axis's name.
    let plan = write_plan(
        dir.path(),
        "clash.toml",
        &format!("{head}[matrix.lab.mtu]\nslow = [\"--rate\", \"2=50mbit\"]\n"),
    );
    let out = nicbench(&["run", &plan, "--dry-run"]);
    assert!(
        stderr(&out).contains("'mtu' is already an axis of this plan"),
        "{}",
        stderr(&out)
    );
}

/// The congestion-control axis (a `[matrix.vary]` over `-C`) runs `loaded`
/// like any workload: each case's load streams used its algorithm, as
/// their kernels reported it, and each phase's verdict names it.
#[test]
fn a_congestion_control_axis_runs_loaded_with_each_algorithm() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "cc.toml",
        &format!(
            "name = \"loaded-cc\"\n[defaults]\nduration = \"0.5s\"\n\
             [[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:{}\"\n\
             [workloads.loaded]\noptions = [\"--phases\", \"download\", \"--idle\", \"0.5s\", \"-P\", \"1\"]\n\
             [matrix]\nworkload = [\"loaded\"]\n\
             [matrix.vary.cc]\ncubic = [\"-C\", \"cubic\"]\nreno = [\"-C\", \"reno\"]\n",
            agent.port
        ),
    );
    let out = nicbench(&["run", &plan, "--db", &db, "--no-shuffle"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    let cases = complete_cases(&db, "loaded-cc");
    let names: Vec<&str> = cases.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(names, ["loaded agent=lo cc=cubic", "loaded agent=lo cc=reno"]);
    for (case, id) in &cases {
        let cc = case.rsplit('=').next().unwrap();
        let doc = crate::common::nicbench_json(&["show", &id.to_string(), "--db", &db, "--json"]);
        let senders: Vec<&str> = doc["streams"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["flow"] == "agent_to_client")
            .filter_map(|s| s["sender"]["tcp_info"]["congestion_control"].as_str())
            .collect();
        assert!(
            !senders.is_empty() && senders.iter().all(|s| *s == cc),
            "{case}: {senders:?}"
        );
        let verdict = doc["sum"]["loaded"]["phases"][0]["verdict"].as_str().unwrap();
        assert!(verdict.contains(&format!("with {cc}")), "{case}: {verdict}");
    }
}

/// The cases of a plan run in the order they ran, from its output lines
/// (`[3/8] tcp agent=b mtu=9000 streams=2: ...`): (agent, mtu) each.
fn agents_and_mtus_in_order(text: &str) -> Vec<(String, String)> {
    let value = |line: &str, key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(|v| v.trim_end_matches(':').to_string())
    };
    text.lines()
        .filter(|l| l.starts_with('['))
        .filter_map(|l| Some((value(l, "agent=")?, value(l, "mtu=")?)))
        .collect()
}

/// Whether a case at 9000 of one agent comes after a case at 1500 of the
/// other that came after an earlier 9000 case of the first: the order that
/// once left the router's link toward the client at 1500.
fn leaves_the_client_link_behind(order: &[(String, String)]) -> bool {
    (0..order.len()).any(|k| {
        let (x, mtu) = &order[k];
        mtu == "9000"
            && (0..k).any(|j| {
                order[j].0 != *x && order[j].1 == "1500" && (0..j).any(|i| order[i].0 == *x && order[i].1 == "9000")
            })
    })
}

#[test]
fn a_two_agent_mtu_plan_through_a_router_measures_every_case_whatever_the_shuffle() {
    require_lab!();
    // a -> r -> b and a -> r -> c: both agents' paths share the router's
    // link toward a, which each MTU case must set, whatever ran before.
    let lab = crate::common::lab_builder()
        .hosts(3)
        .via_router()
        .no_agents()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "a key of at least sixteen bytes, for the plan test\n").unwrap();
    let psk = psk.display().to_string();
    let (b, c) = (lab.addr("b").to_string(), lab.addr("c").to_string());
    let extra = ["--psk-file", psk.as_str(), "--allow-host-changes"];
    let agent_b = AgentProcess::start_with(lab.command("b", BIN), &b, &extra);
    let agent_c = AgentProcess::start_with(lab.command("c", BIN), &c, &extra);
    let db = dir.path().join("r.db").display().to_string();
    let plan = write_plan(
        dir.path(),
        "two.toml",
        &format!(
            "name = \"two-agents\"\n[defaults]\nduration = \"0.3s\"\nallow_host_changes = true\n\
             [[agents]]\nlabel = \"b\"\naddress = \"{b}:{}\"\npsk_file = \"{psk}\"\n\
             [[agents]]\nlabel = \"c\"\naddress = \"{c}:{}\"\npsk_file = \"{psk}\"\n\
             [matrix]\nworkload = [\"tcp\"]\nmtu = [1500, 9000]\nstreams = [1, 2]\n",
            agent_b.port, agent_c.port
        ),
    );
    let mut exercised = 0;
    for seed in ["1", "2", "3"] {
        let mut run = lab.command("a", BIN);
        run.args(["run", &plan, "--db", &db, "--restart", "--seed", seed]);
        let out = crate::common::run_captured(&mut run, "nicbench run in the lab");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(
            out.status.success(),
            "seed {seed}: {text}\n{}\n{}",
            agent_b.logs(),
            agent_c.logs()
        );
        assert!(
            text.contains("8 of 8 cases done (8 measured now, 0 earlier), 0 failed"),
            "seed {seed}: {text}"
        );
        let order = agents_and_mtus_in_order(&text);
        assert_eq!(order.len(), 8, "seed {seed}: {text}");
        exercised += usize::from(leaves_the_client_link_behind(&order));
        // Every link back at the lab's MTU after each plan run.
        for (link, host) in [(1, "a"), (1, "r"), (2, "r"), (2, "b"), (3, "r"), (3, "c")] {
            assert_eq!(
                lab.kernel_link(link, host).unwrap().mtu,
                1500,
                "seed {seed}: link {link} in {host}"
            );
        }
    }
    // At least one of the seeds ran the order that once failed (so this
    // test would catch it again).
    assert!(
        exercised > 0,
        "no seed ran a 9000 case after the other agent's 1500 case"
    );
    // Each run measured at its case's MTU on both ends (the facts recorded
    // with the run): 24 runs, 8 per plan run.
    let out = nicbench(&["export", "--db", &db, "--tag", "plan=two-agents", "--format", "json"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.iter().filter(|r| r["complete"] == true).count(), 24, "{runs:#?}");
    for r in runs {
        let mtu: u64 = r["tags"]["mtu"].as_str().unwrap().parse().unwrap();
        let id = r["id"].as_i64().unwrap().to_string();
        let doc = crate::common::nicbench_json(&["show", &id, "--db", &db, "--json"]);
        assert_eq!(
            doc["client"]["facts"]["interface"]["mtu_bytes"], mtu,
            "client side of run {id}"
        );
        assert_eq!(
            doc["agent"]["facts"]["interface"]["mtu_bytes"], mtu,
            "agent side of run {id}"
        );
    }
}
