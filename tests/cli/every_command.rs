//! Every subcommand under the two things a shell does to it that a new
//! user hit (issue 43): its output into a pipe the reader already closed
//! (`nicbench run plan.toml 2>&1 | head -3`), and a Ctrl-C delivered twice
//! by `timeout -s INT`, once to the process and once to its group. One
//! table lists every subcommand ([`TABLE`]); a test fails when clap has a
//! subcommand the table lacks, so a new command cannot miss either test.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::CommandFactory;

use crate::common::{clean_env, stderr, wait_output, AgentProcess, Lines, BIN};

/// How a command ends.
#[derive(Clone, Copy)]
enum Ends {
    /// By itself, quickly: under `timeout -s INT` it is done long before.
    Itself,
    /// It runs on until stopped: once `ready`, SIGINT comes twice as
    /// `timeout` sends it; it exits with `code` and its stdout holds `header`.
    OnSigint {
        ready: Ready,
        code: i32,
        header: Option<&'static str>,
    },
}

/// When a long command has its signal handlers in place.
#[derive(Clone, Copy)]
enum Ready {
    /// A line with this text on its stdout or stderr.
    Says(&'static str),
    /// It has started a child process (the watched command), which it
    /// does after installing them.
    HasChild,
}

/// One subcommand (`lab status`: the path through nested subcommands), its
/// arguments (with `{port}`, `{db}`, `{dir}`, `{fixtures}` filled in), the
/// exit code when it ends by itself, and how it ends.
struct Row {
    command: &'static str,
    args: &'static [&'static str],
    code: i32,
    ends: Ends,
}

const fn row(command: &'static str, args: &'static [&'static str], ends: Ends) -> Row {
    Row {
        command,
        args,
        code: 0,
        ends,
    }
}

/// A live interval line (`-i`): the test is running.
const INTERVAL: Ready = Ready::Says("bit/s");

const TABLE: &[Row] = &[
    row(
        "serve",
        &["serve", "-p", "0", "-B", "127.0.0.1", "-v"],
        Ends::OnSigint {
            ready: Ready::Says("listening on "),
            code: 0,
            header: None,
        },
    ),
    row(
        "tcp",
        &["tcp", "127.0.0.1", "-p", "{port}", "-t", "30", "-i", "0.2", "--no-save"],
        Ends::OnSigint {
            ready: INTERVAL,
            code: 6,
            header: Some("nicbench tcp: client"),
        },
    ),
    row(
        "udp",
        &[
            "udp",
            "127.0.0.1",
            "-p",
            "{port}",
            "-t",
            "30",
            "-i",
            "0.2",
            "-b",
            "10M",
            "--no-save",
        ],
        Ends::OnSigint {
            ready: INTERVAL,
            code: 6,
            header: Some("nicbench udp: client"),
        },
    ),
    row(
        "rr",
        &["rr", "127.0.0.1", "-p", "{port}", "-t", "30", "-i", "0.2", "--no-save"],
        Ends::OnSigint {
            ready: Ready::Says("/s"),
            code: 6,
            header: Some("nicbench rr: client"),
        },
    ),
    row(
        "sweep",
        &["sweep", "127.0.0.1", "-p", "{port}", "--sizes", "1,1K", "--no-save"],
        Ends::Itself,
    ),
    row(
        "files",
        &[
            "files",
            "127.0.0.1",
            "-p",
            "{port}",
            "--generate",
            "4x1K",
            "--raw-time",
            "0.3s",
            "--no-save",
        ],
        Ends::Itself,
    ),
    row(
        "loaded",
        &[
            "loaded",
            "127.0.0.1",
            "-p",
            "{port}",
            "--phase-time",
            "0.5s",
            "--no-save",
        ],
        Ends::Itself,
    ),
    row(
        "watch",
        &["watch", "--iface", "lo", "--no-save", "--", "sleep", "30"],
        Ends::OnSigint {
            ready: Ready::HasChild,
            // sleep dies of the forwarded SIGINT: 128 + 2, passed through.
            code: 130,
            header: Some("watch: "),
        },
    ),
    // Its report goes to the test's directory, not the checkout's.
    row(
        "demo",
        &["demo", "-t", "0.3", "--report", "{dir}/demo-{n}.html"],
        Ends::Itself,
    ),
    row("host", &["host"], Ends::Itself),
    row("linerate", &["linerate", "--speed", "10G"], Ends::Itself),
    row("lab status", &["lab", "status"], Ends::Itself),
    row("lab up", &["lab", "up", "--help"], Ends::Itself),
    row("lab exec", &["lab", "exec", "--help"], Ends::Itself),
    row("lab set", &["lab", "set", "--help"], Ends::Itself),
    row("lab down", &["lab", "down", "--help"], Ends::Itself),
    // Hidden: what `lab up` starts for a CPU limit (docs/LAB.md).
    row("lab thief", &["lab", "thief", "--help"], Ends::Itself),
    row(
        "run",
        &["run", "{dir}/plan.toml", "--db", "{dir}/plan.db"],
        Ends::OnSigint {
            // Cases run in-process: the plan's first line comes after its
            // handlers and the cases' are in place.
            ready: Ready::Says("cases, seed"),
            code: 6,
            header: Some("plan every-command, run "),
        },
    ),
    row(
        "mesh",
        &[
            "mesh",
            "a=127.0.0.1:{peer0}",
            "b=127.0.0.1:{peer1}",
            "-t",
            "0.3s",
            "--psk-file",
            "{dir}/psk",
            "--db",
            "{dir}/mesh-{n}.db",
        ],
        Ends::Itself,
    ),
    row(
        "multicast",
        &[
            "multicast",
            "127.0.0.1:{port}",
            "-g",
            "239.201.1.1:23456",
            "-t",
            "30",
            "-b",
            "1M",
            "--join-wait",
            "200ms",
        ],
        Ends::OnSigint {
            ready: Ready::Says("nicbench multicast: "),
            code: 6,
            header: Some("sender (this host)"),
        },
    ),
    row("runs", &["runs", "--db", "{db}"], Ends::Itself),
    row("show", &["show", "1", "--db", "{db}"], Ends::Itself),
    row("compare", &["compare", "--db", "{db}"], Ends::Itself),
    row("diff", &["diff", "1", "2", "--db", "{db}"], Ends::Itself),
    row("export", &["export", "--db", "{db}"], Ends::Itself),
    Row {
        command: "rm",
        args: &["rm", "999", "--db", "{db}"],
        // No such run.
        code: 7,
        ends: Ends::Itself,
    },
    row(
        "import",
        &["import", "{fixtures}/run-tcp.json", "--db", "{dir}/import-{n}.db"],
        Ends::Itself,
    ),
    row(
        "db backup",
        &["db", "backup", "{dir}/backup-{n}.db", "--db", "{db}"],
        Ends::Itself,
    ),
    // A push or pull takes any other store, a file too (a PostgreSQL one
    // in tests/cli/postgres.rs).
    row(
        "db push",
        &["db", "push", "{dir}/archive-{n}.db", "--db", "{db}"],
        Ends::Itself,
    ),
    row(
        "db pull",
        &["db", "pull", "{db}", "--db", "{dir}/pulled-{n}.db"],
        Ends::Itself,
    ),
    row(
        "plot",
        &["plot", "--db", "{db}", "--kind", "bars", "--out", "{dir}/plot-{n}.svg"],
        Ends::Itself,
    ),
    row(
        "report",
        &["report", "--db", "{db}", "--out", "{dir}/report-{n}.html"],
        Ends::Itself,
    ),
    row("man", &["man"], Ends::Itself),
    row("completions", &["completions", "bash"], Ends::Itself),
];

/// Every subcommand clap knows, nested ones as `lab status`; a command
/// with subcommands of its own is listed by them.
fn subcommands() -> Vec<String> {
    fn walk(prefix: &str, command: &clap::Command, out: &mut Vec<String>) {
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            let name = format!("{prefix}{}", sub.get_name());
            if sub.has_subcommands() {
                walk(&format!("{name} "), sub, out);
            } else {
                out.push(name);
            }
        }
    }
    let mut out = Vec::new();
    walk("", &nicbench::cli::Cli::command(), &mut out);
    out
}

#[test]
fn the_table_lists_every_subcommand() {
    let mut listed: Vec<&str> = TABLE.iter().map(|r| r.command).collect();
    listed.sort();
    let mut known = subcommands();
    known.sort();
    assert_eq!(
        listed, known,
        "tests/cli/every_command.rs: TABLE must list every subcommand once, with how it ends"
    );
    for r in TABLE {
        let words: Vec<&str> = r.command.split(' ').collect();
        assert_eq!(
            &r.args[..words.len()],
            &words[..],
            "{}: args start with the command",
            r.command
        );
    }
}

/// What the rows run against: a loopback agent, a database with two runs,
/// a plan, a scratch directory.
struct Setting {
    agent: AgentProcess,
    /// Two agents that run peer tests, for the mesh.
    peers: Vec<AgentProcess>,
    dir: tempfile::TempDir,
    db: PathBuf,
}

impl Setting {
    fn new() -> Setting {
        let agent = AgentProcess::start(&[]);
        let dir = tempfile::tempdir().unwrap();
        let psk = dir.path().join("psk");
        std::fs::write(&psk, "a mesh key of at least sixteen bytes\n").unwrap();
        let psk = psk.display().to_string();
        let peers = (0..2)
            .map(|_| AgentProcess::start(&["--psk-file", &psk, "--allow-peer-tests"]))
            .collect();
        let db = dir.path().join("results.db");
        let out = Command::new(BIN)
            .args([
                "import",
                &format!("{}/run-tcp.json", fixtures()),
                &format!("{}/netpipe-3.7.2-loopback.np.out", fixtures()),
                "--db",
                db.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        // A plan long enough to be interrupted: one case of 30 s.
        std::fs::write(
            dir.path().join("plan.toml"),
            format!(
                "name = \"every-command\"\n\n[defaults]\nduration = \"30s\"\n\n\
                 [[agents]]\nlabel = \"lo\"\naddress = \"127.0.0.1:{}\"\n\n\
                 [matrix]\nworkload = [\"tcp\"]\n",
                agent.port
            ),
        )
        .unwrap();
        Setting { agent, peers, dir, db }
    }

    fn args(&self, row: &Row, n: usize) -> Vec<String> {
        row.args
            .iter()
            .map(|a| {
                a.replace("{port}", &self.agent.port_arg())
                    .replace("{peer0}", &self.peers[0].port_arg())
                    .replace("{peer1}", &self.peers[1].port_arg())
                    .replace("{db}", self.db.to_str().unwrap())
                    .replace("{dir}", self.dir.path().to_str().unwrap())
                    .replace("{fixtures}", &fixtures())
                    .replace("{n}", &n.to_string())
            })
            .collect()
    }

    fn command(&self, row: &Row, n: usize) -> Command {
        let mut command = Command::new(BIN);
        clean_env(&mut command)
            .args(self.args(row, n))
            .env("NICBENCH_DB", self.dir.path().join("default.db"))
            .stdin(Stdio::null());
        command
    }
}

fn fixtures() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures").to_string()
}

/// A pipe whose reading end is closed: what `| head -1` leaves once head
/// has its line.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two fds into the array; each is owned below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe(2)");
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

const LIMIT: Duration = Duration::from_secs(120);

fn signal(pid: i32, signal: libc::c_int) {
    // SAFETY: kill has no memory preconditions; pid is our own child or its group.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
}

/// Starts `command` in a process group of its own, waits until it is
/// ready, and stops it as `timeout -s INT` does: SIGINT to the process,
/// then to its group, from this one process.
fn interrupt_like_timeout(mut command: Command, ready: Ready, what: &str) -> (Option<i32>, String, String) {
    command.stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = command.spawn().unwrap();
    let out = Lines::collect(child.stdout.take().unwrap());
    let err = Lines::collect(child.stderr.take().unwrap());
    let pid = child.id() as i32;
    if let Err(e) = wait_ready(pid, &out, &err, ready) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: not ready ({e}): {}\n{}", out.text(), err.text());
    }
    signal(pid, libc::SIGINT);
    signal(-pid, libc::SIGINT);
    let status = wait_output(child, LIMIT, what).status;
    // Both pipes end once the process (and the group's children) are gone.
    let _ = out.wait_for(0, "\u{0}", LIMIT);
    let _ = err.wait_for(0, "\u{0}", LIMIT);
    (status.code(), out.text(), err.text())
}

fn has_child(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).is_ok_and(|c| !c.trim().is_empty())
}

/// Waits (at most [`LIMIT`]) until the process is [`Ready`].
fn wait_ready(pid: i32, out: &Lines, err: &Lines, ready: Ready) -> Result<(), String> {
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        let now = match ready {
            Ready::Says(needle) => out.text().contains(needle) || err.text().contains(needle),
            Ready::HasChild => has_child(pid),
        };
        if now {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("not ready within {LIMIT:?}"));
        }
        // Polling a state (/proc, the lines so far), not standing in for one.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `nicbench CMD > closed-pipe` with stderr read, and `nicbench CMD 2>&1 |
/// head -1` with both closed: status as when the pipe stayed open, never
/// a panic (101) or "Broken pipe". A command that runs until stopped is
/// stopped with SIGINT once ready (its readiness is on stderr, kept open
/// for that in the first form; in the second it is left out).
#[test]
fn every_subcommand_ends_quietly_into_a_closed_pipe() {
    let setting = Setting::new();
    for (n, row) in TABLE.iter().enumerate() {
        let what = format!("nicbench {} > closed pipe", row.args.join(" "));
        let mut command = setting.command(row, n * 2);
        command.stdout(Stdio::from(closed_pipe()));
        let (code, err) = match (row.ends, row.command) {
            // The agent: stopped with one SIGINT once it listens (its -v
            // log on stderr says so), which ends it with status 0.
            (
                Ends::OnSigint {
                    ready: Ready::Says(ready),
                    ..
                },
                "serve",
            ) => {
                command.stderr(Stdio::piped());
                let mut child = command.spawn().unwrap();
                let err = Lines::collect(child.stderr.take().unwrap());
                err.wait_for(0, ready, LIMIT).unwrap_or_else(|e| panic!("{what}: {e}"));
                signal(child.id() as i32, libc::SIGINT);
                let status = wait_output(child, LIMIT, &what).status;
                let _ = err.wait_for(0, "\u{0}", LIMIT);
                (status.code(), err.text())
            }
            (ends, _) => {
                let mut command = match ends {
                    Ends::Itself => command,
                    Ends::OnSigint { .. } => short_form(&setting, row, n * 2),
                };
                command.stdout(Stdio::from(closed_pipe())).stderr(Stdio::piped());
                let out = wait_output(command.spawn().unwrap(), LIMIT, &what);
                (out.status.code(), stderr(&out))
            }
        };
        assert!(!err.contains("panicked"), "{what}: {err}");
        assert!(!err.contains("Broken pipe"), "{what}: {err}");
        assert_eq!(code, Some(row.code), "{what}: {err}");

        // 2>&1 | head -1, once head has gone: nothing can be said at all.
        let what = format!("nicbench {} 2>&1 | head -1", row.args.join(" "));
        let mut command = match row.ends {
            Ends::Itself => setting.command(row, n * 2 + 1),
            Ends::OnSigint { .. } => short_form(&setting, row, n * 2 + 1),
        };
        let pipe = closed_pipe();
        command
            .stdout(Stdio::from(pipe.try_clone().unwrap()))
            .stderr(Stdio::from(pipe));
        let out = wait_output(command.spawn().unwrap(), LIMIT, &what);
        assert_eq!(out.status.code(), Some(row.code), "{what}");
    }
}

/// The command of an [`Ends::OnSigint`] row as one that ends by itself:
/// a short test; the agent and `run` are given other work of their own.
fn short_form(setting: &Setting, row: &Row, n: usize) -> Command {
    let args = setting.args(row, n);
    let args: Vec<String> = match row.command {
        "serve" => vec!["serve".into(), "--help".into()],
        "run" => {
            let plan = setting.dir.path().join(format!("short-{n}.toml"));
            std::fs::write(
                &plan,
                std::fs::read_to_string(setting.dir.path().join("plan.toml"))
                    .unwrap()
                    .replace("\"30s\"", "\"0.3s\""),
            )
            .unwrap();
            let db = setting.dir.path().join(format!("short-{n}.db"));
            vec![
                "run".into(),
                plan.display().to_string(),
                "--db".into(),
                db.display().to_string(),
            ]
        }
        "watch" => args
            .iter()
            .map(|a| if a == "30" { "0".into() } else { a.clone() })
            .collect(),
        _ => args
            .iter()
            .map(|a| if a == "30" { "0.3".into() } else { a.clone() })
            .collect(),
    };
    let mut command = Command::new(BIN);
    clean_env(&mut command)
        .args(args)
        .env("NICBENCH_DB", setting.dir.path().join("default.db"))
        .stdin(Stdio::null());
    command
}

/// `timeout -s INT T nicbench CMD > file`: a command still running gets
/// SIGINT twice from `timeout` (the process, then its group), which is one
/// stop, not "again to exit at once": it exits as after one Ctrl-C, with
/// what it had to say on stdout. A command that ends by itself does so
/// under the same `timeout` untouched.
#[test]
fn every_subcommand_takes_timeouts_double_sigint_as_one_stop() {
    let setting = Setting::new();
    for (n, row) in TABLE.iter().enumerate() {
        let what = format!("timeout -s INT nicbench {}", row.args.join(" "));
        match row.ends {
            Ends::Itself => {
                let args = setting.args(row, 1000 + n);
                let mut command = Command::new("timeout");
                clean_env(&mut command)
                    .args(["-s", "INT", "600", BIN])
                    .args(args)
                    .env("NICBENCH_DB", setting.dir.path().join("default.db"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let out = wait_output(command.spawn().unwrap(), LIMIT, &what);
                assert_eq!(out.status.code(), Some(row.code), "{what}: {}", stderr(&out));
            }
            Ends::OnSigint { ready, code, header } => {
                let command = setting.command(row, 1000 + n);
                let (status, out, err) = interrupt_like_timeout(command, ready, &what);
                assert_eq!(status, Some(code), "{what}: {err}\n{out}");
                if let Some(header) = header {
                    assert!(out.contains(header), "{what}: no {header:?} on stdout: {out}\n{err}");
                }
                assert!(!err.contains("panicked"), "{what}: {err}");
            }
        }
    }
}
