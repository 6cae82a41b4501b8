//! Helpers: start an agent process on loopback, run the client binary.
//! Every wait here has a deadline that fails the test (and kills what it
//! started) instead of hanging the suite; nothing waits by sleeping.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nicbench");

/// How long one client command may run before the test fails: far more
/// than any test here asks for, so only a hung process reaches it.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(180);

/// How long to wait for an agent's log line (a state change it reports).
pub const LOG_LIMIT: Duration = Duration::from_secs(30);

/// A lab whose hosts run this build's agent (check `require_lab!` first).
pub fn lab_builder() -> nicbench::lab::LabBuilder {
    nicbench::lab::Lab::builder().agent_program(BIN)
}

/// What `require!` does with a test whose need is not met: panics with
/// `why` when the `CI` variable is set (any value: CI must run every test),
/// otherwise says SKIPPED on stderr and lets the test return.
pub fn skip_or_fail(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{why}\nCI is set, so this fails instead of skipping: .ci/run installs every tool and must run as root with CAP_NET_ADMIN");
    }
    eprintln!("SKIPPED: {why}");
}

/// Ok when `program ARGS` runs and succeeds here; Err saying how to get it.
pub fn tool(program: &str, args: &[&str], install: &str) -> Result<(), String> {
    match Command::new(program).args(args).stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            stderr(&out).trim()
        )),
        Err(e) => Err(format!("{program} is not runnable here ({e}): {install}")),
    }
}

/// A fresh directory every user may enter (0755, in a parent chain every
/// user may traverse), for what a test runs as another user (`nobody`):
/// the build's binary and the files that user must reach. The checkout
/// and its target directory may sit under a directory only root enters
/// (a clone in /root or in a 0700 directory); nothing here depends on
/// that. Removed when dropped.
pub struct SharedDir {
    dir: tempfile::TempDir,
}

/// True when every directory from `path` up to `/` lets others through.
fn others_may_traverse(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.ancestors()
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

impl SharedDir {
    pub fn new() -> SharedDir {
        use std::os::unix::fs::PermissionsExt;
        let temp = std::env::temp_dir();
        let base = if others_may_traverse(&temp) {
            temp
        } else {
            std::path::PathBuf::from("/tmp")
        };
        assert!(
            others_may_traverse(&base),
            "no temporary directory every user may enter ({} is closed to others)",
            base.display()
        );
        let dir = tempfile::Builder::new().prefix("nb-shared-").tempdir_in(&base).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        SharedDir { dir }
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// This build's `nicbench` in the directory (a hard link, a copy on
    /// another file system), executable by everyone.
    pub fn binary(&self) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join("nicbench");
        if !path.exists() && std::fs::hard_link(BIN, &path).is_err() {
            std::fs::copy(BIN, &path).unwrap();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

/// Ok when this host has an IPv6 loopback (a container may have none, or
/// have it disabled with net.ipv6.conf.lo.disable_ipv6=1).
pub fn ipv6_loopback() -> Result<(), String> {
    std::net::TcpListener::bind("[::1]:0")
        .map(drop)
        .map_err(|e| format!("no IPv6 loopback here (binding [::1]:0: {e}); sysctl net.ipv6.conf.lo.disable_ipv6=0"))
}

/// Removes every `NICBENCH_*` variable of the test's environment from
/// `command` (a developer's `NICBENCH_PSK_FILE` or `NICBENCH_PORT` must not
/// change what a test runs against), but `NICBENCH_DB`, which the test
/// binary itself points at a database of its own (main.rs): without it a
/// test's runs would land in the user's `~/.local/share` database.
pub fn clean_env(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        if name_text.starts_with("NICBENCH_") && name_text != "NICBENCH_DB" {
            command.env_remove(&name);
        }
    }
    command
}

/// Lines a child writes to a pipe, collected by a reader thread; waiters
/// are woken by every new line and by the pipe closing.
#[derive(Clone)]
pub struct Lines {
    state: Arc<(Mutex<Collected>, Condvar)>,
}

/// The lines so far, and whether the pipe has closed.
#[derive(Default)]
struct Collected {
    lines: Vec<String>,
    closed: bool,
}

impl Lines {
    pub fn collect(pipe: impl Read + Send + 'static) -> Lines {
        let lines = Lines {
            state: Arc::new((Mutex::default(), Condvar::new())),
        };
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                sink.state.0.lock().unwrap().lines.push(line);
                sink.state.1.notify_all();
            }
            sink.state.0.lock().unwrap().closed = true;
            sink.state.1.notify_all();
        });
        lines
    }

    /// How many lines so far: a mark for [`Lines::wait_for`].
    pub fn count(&self) -> usize {
        self.state.0.lock().unwrap().lines.len()
    }

    pub fn text(&self) -> String {
        self.state.0.lock().unwrap().lines.join("\n")
    }

    /// Waits for a line from number `from` on that contains `needle` and
    /// returns it; Err with every line when the pipe closed or `limit`
    /// passed first.
    pub fn wait_for(&self, from: usize, needle: &str, limit: Duration) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        let (lock, wake) = &*self.state;
        let mut state = lock.lock().unwrap();
        loop {
            if let Some(line) = state.lines.iter().skip(from).find(|l| l.contains(needle)) {
                return Ok(line.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if state.closed || left.is_zero() {
                let why = if state.closed { "the pipe closed" } else { "timed out" };
                return Err(format!(
                    "no line with '{needle}' ({why} after {:.0} s); lines:\n{}",
                    limit.as_secs_f64(),
                    state.lines.join("\n")
                ));
            }
            state = wake.wait_timeout(state, left).unwrap().0;
        }
    }
}

/// An agent process whose stderr lines are kept (for assertions and to
/// wait on what it reports); killed when dropped, also when a test panics.
pub struct AgentProcess {
    pub child: Child,
    pub port: u16,
    log: Lines,
}

impl AgentProcess {
    /// Starts `nicbench serve` on 127.0.0.1 with a kernel-chosen port.
    pub fn start(extra: &[&str]) -> AgentProcess {
        AgentProcess::start_with(Command::new(BIN), "127.0.0.1", extra)
    }

    /// Starts an agent from `command` (e.g. wrapped in `ip netns exec`).
    /// Fails (and kills it) when it has not announced its port within 30 s.
    pub fn start_with(mut command: Command, bind: &str, extra: &[&str]) -> AgentProcess {
        clean_env(&mut command)
            .args(["serve", "-p", "0", "-B", bind, "-v"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start the agent");
        let log = Lines::collect(child.stderr.take().unwrap());
        let line = match log.wait_for(0, "listening on ", LOG_LIMIT) {
            Ok(line) => line,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the agent did not announce its port: {e}");
            }
        };
        let addr = line.split("listening on ").nth(1).unwrap();
        let addr = addr.split_whitespace().next().unwrap();
        let port = addr.rsplit(':').next().unwrap().parse().unwrap();
        AgentProcess { child, port, log }
    }

    pub fn port_arg(&self) -> String {
        self.port.to_string()
    }

    /// Runs `nicbench WORKLOAD 127.0.0.1 -p PORT ARGS... --json` against this
    /// agent and parses the result, failing with the client's stderr.
    pub fn run_json(&self, workload: &str, args: &[&str]) -> serde_json::Value {
        let port = self.port_arg();
        let mut argv = vec![workload, "127.0.0.1", "-p", &port];
        argv.extend_from_slice(args);
        argv.push("--json");
        nicbench_json(&argv)
    }

    /// Every log line so far.
    pub fn logs(&self) -> String {
        self.log.text()
    }

    /// A mark: [`AgentProcess::wait_for_log_after`] looks only at lines
    /// logged after it.
    pub fn log_mark(&self) -> usize {
        self.log.count()
    }

    /// Waits (at most [`LOG_LIMIT`]) for a log line containing `needle`,
    /// and returns every line so far.
    pub fn wait_for_log(&self, needle: &str) -> String {
        self.wait_for_log_after(0, needle)
    }

    /// Waits for a log line containing `needle` logged after `mark`.
    pub fn wait_for_log_after(&self, mark: usize, needle: &str) -> String {
        if let Err(e) = self.log.wait_for(mark, needle, LOG_LIMIT) {
            panic!("waiting for the agent: {e}");
        }
        self.logs()
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `child` with a deadline: past `limit` it is killed and the
/// test fails with what it printed. `child` must have piped stdout and
/// stderr.
pub fn wait_output(child: Child, limit: Duration, what: &str) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => {
            waiter.join().unwrap();
            out.expect("wait for the process")
        }
        Err(_) => {
            // SAFETY: kill(2) on our own child, which has not been reaped
            // (its waiter has not returned).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let out = rx.recv().unwrap().expect("wait for the killed process");
            waiter.join().unwrap();
            panic!(
                "{what} did not finish within {:.0} s and was killed; stderr:\n{}\nstdout:\n{}",
                limit.as_secs_f64(),
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}

/// Runs a prepared command (a nicbench in a lab host, say) to its end with
/// the test environment, no stdin and both outputs captured, failing the
/// test when it runs longer than [`COMMAND_LIMIT`].
pub fn run_captured(command: &mut Command, what: &str) -> Output {
    wait_output(spawn_captured(command, what), COMMAND_LIMIT, what)
}

/// Starts a prepared command with the test environment, no stdin and both
/// outputs piped (for [`wait_output`], or to signal it first).
pub fn spawn_captured(command: &mut Command, what: &str) -> Child {
    clean_env(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"))
}

/// Starts every command at once (see [`spawn_captured`]), then waits for
/// each in turn: concurrent writers to one store, say.
pub fn run_at_once(commands: impl IntoIterator<Item = Command>, what: &str) -> Vec<Output> {
    let children: Vec<Child> = commands
        .into_iter()
        .map(|mut command| spawn_captured(&mut command, what))
        .collect();
    children
        .into_iter()
        .map(|child| wait_output(child, COMMAND_LIMIT, what))
        .collect()
}

/// Runs the client binary with `args`, failing the test when it runs
/// longer than [`COMMAND_LIMIT`].
/// Text assertions read whole lines, so the text is not fitted to a
/// terminal width here (fitting is tested on fixtures in schema.rs).
pub fn nicbench(args: &[&str]) -> Output {
    let child = clean_env(&mut Command::new(BIN))
        .args(args)
        .env("COLUMNS", "1000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nicbench");
    wait_output(child, COMMAND_LIMIT, &format!("nicbench {args:?}"))
}

/// Runs the client and parses its `--json` output, failing with its stderr.
pub fn nicbench_json(args: &[&str]) -> serde_json::Value {
    let out = nicbench(args);
    assert!(
        out.status.success(),
        "nicbench {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Removes a CLI-built lab when the test ends, also on failure.
pub struct CliLab(pub String);

impl Drop for CliLab {
    fn drop(&mut self) {
        let _ = nicbench(&["lab", "down", &self.0]);
    }
}

/// Runs `nicbench ARGS`, which must succeed; its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = nicbench(args);
    assert!(out.status.success(), "nicbench {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A turn at building a lab with a CPU-limited host, held until dropped.
/// Every such lab gives its limited host a core of its own, and two at
/// once on one machine pick the same core: their real-time thieves then
/// share it, and each host gets a slice of what is left (beside two `yes`
/// hogs, a receiver at 2% took more than the agent's 5 s grace to drain).
/// Tests that limit a host take turns, across test processes, by an
/// exclusive lock on one file.
pub struct LimitedLabTurn(#[allow(dead_code)] std::fs::File);

pub fn limited_lab_turn() -> LimitedLabTurn {
    use std::os::fd::AsRawFd;
    let path = std::env::temp_dir().join("nicbench-tests-limited-lab.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // SAFETY: flock on a descriptor we own; released when it closes.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock {}: {}", path.display(), std::io::Error::last_os_error());
    LimitedLabTurn(file)
}

/// A one-way delay (`udp.one_way`, `rr.one_way_request`...) measured on one
/// kernel: `samples` as counted, its quantiles in order, the one clock's
/// bound 0 and nothing below zero. Returns its fastest, in seconds.
pub fn assert_one_clock_delay(d: &serde_json::Value, samples: &serde_json::Value, what: &str) -> f64 {
    assert_eq!(&d["samples"], samples, "{what}: {d}");
    let figures: Vec<f64> = [
        "min_seconds",
        "p50_seconds",
        "p90_seconds",
        "p99_seconds",
        "max_seconds",
    ]
    .iter()
    .map(|k| d[k].as_f64().unwrap_or_else(|| panic!("{what}: no {k} in {d}")))
    .collect();
    assert!(figures.windows(2).all(|w| w[0] <= w[1]), "{what}: {d}");
    assert_eq!(
        d["clock_bound_seconds"].as_f64(),
        Some(0.0),
        "{what}: one kernel, one clock: {d}"
    );
    assert!(figures[0] >= 0.0, "{what}: a delay below zero on one clock: {d}");
    figures[0]
}
