//! Helpers: start an agent process on loopback, run the client binary.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nicbench");

/// A lab whose hosts run this build's agent (check `require_lab!` first).
pub fn lab_builder() -> nicbench::lab::LabBuilder {
    nicbench::lab::Lab::builder().agent_program(BIN)
}

/// An agent process that is killed when dropped (also when a test panics).
pub struct AgentProcess {
    pub child: Child,
    pub port: u16,
}

impl AgentProcess {
    /// Starts `nicbench serve` on 127.0.0.1 with a kernel-chosen port.
    pub fn start(extra: &[&str]) -> AgentProcess {
        AgentProcess::start_with(Command::new(BIN), "127.0.0.1", extra)
    }

    /// Starts an agent from `command` (e.g. wrapped in `ip netns exec`).
    pub fn start_with(mut command: Command, bind: &str, extra: &[&str]) -> AgentProcess {
        command
            .args(["serve", "-p", "0", "-B", bind, "-v"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start the agent");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            assert!(Instant::now() < deadline, "agent did not announce its port");
            let line = lines.next().expect("agent exited before listening").unwrap();
            if let Some(addr) = line.split("listening on ").nth(1) {
                break addr.rsplit(':').next().unwrap().trim().parse().unwrap();
            }
        };
        // Keep draining stderr so the agent never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        AgentProcess { child, port }
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
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the client binary with `args`.
/// Text assertions read whole lines, so the text is not fitted to a
/// terminal width here (fitting is tested on fixtures in schema.rs).
pub fn nicbench(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("COLUMNS", "1000")
        .stdin(Stdio::null())
        .output()
        .expect("run nicbench")
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
