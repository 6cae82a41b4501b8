//! Helpers for the hostile-client and service tests: an agent process
//! whose log lines are kept for assertions, and a raw control connection
//! that can send anything, well-formed or not.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use nicbench::protocol::framing::{encode, Decoder};
use nicbench::protocol::{Hello, Message, MAX_AGENT_FRAME};

use super::common::{nicbench, AgentProcess, LOG_LIMIT};

/// The agent of the hostile-client and service tests: an [`AgentProcess`]
/// (its log lines kept) with checks that it is still alive and serving.
pub type LoggedAgent = AgentProcess;

impl AgentProcess {
    /// Fails when the agent process has exited.
    pub fn assert_alive(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the agent exited:\n{}",
            self.logs()
        );
    }

    /// A short normal `tcp` test against this agent must succeed.
    pub fn assert_serves_normally(&mut self) {
        self.assert_alive();
        let out = nicbench(&["tcp", "127.0.0.1", "-p", &self.port_arg(), "-t", "0.3", "--json"]);
        assert!(
            out.status.success(),
            "a normal test failed after the hostile ones: {}\nagent log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(run["sum"]["receiver"]["bytes"].as_u64().unwrap() > 0);
    }

    /// Sends `signal` to the agent process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Waits up to `limit` for the agent to exit and returns its status.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the agent did not exit:\n{}", self.logs());
            // Polls the process state (no notification exists for a
            // child's exit short of blocking in wait).
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Number of file descriptors the agent has open (sockets included).
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Waits until the agent holds at most `fds` descriptors again (its
    /// closed connections released), failing after 30 s.
    pub fn wait_for_open_fds_at_most(&self, fds: usize) {
        let deadline = Instant::now() + LOG_LIMIT;
        while self.open_fds() > fds {
            assert!(
                Instant::now() < deadline,
                "the agent still holds {} descriptors (expected at most {fds}):\n{}",
                self.open_fds(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A control connection that sends raw bytes or messages.
pub struct Raw {
    pub stream: TcpStream,
    decoder: Decoder,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        Raw::from_stream(TcpStream::connect(("127.0.0.1", port)).expect("connect to the agent"))
    }

    pub fn from_stream(stream: TcpStream) -> Raw {
        Raw {
            stream,
            decoder: Decoder::new(MAX_AGENT_FRAME),
        }
    }

    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Raw {
        // The agent may already have closed: that is not the test's failure.
        let _ = self.stream.write_all(bytes);
        self
    }

    pub fn frame(&mut self, body: &[u8]) -> &mut Raw {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.bytes(&frame)
    }

    pub fn send(&mut self, message: &Message) -> &mut Raw {
        self.bytes(&encode(message))
    }

    pub fn hello(&mut self) -> &mut Raw {
        self.send(&Message::Hello(Hello::ours(nicbench::workload::names())));
        match self.recv() {
            Some(Message::Hello(_)) => self,
            other => panic!("expected the agent's hello, got {other:?}"),
        }
    }

    /// The next message within 15 s, or None when the agent closed.
    pub fn recv(&mut self) -> Option<Message> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut chunk = [0u8; 4096];
        loop {
            match self.decoder.next_message() {
                Ok(Some(m)) => return Some(m),
                Ok(None) => {}
                Err(e) => panic!("the agent sent a bad frame: {e}"),
            }
            assert!(Instant::now() < deadline, "the agent neither answered nor closed");
            self.stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.decoder.push(&chunk[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return None,
            }
        }
    }

    /// Expects an `error` naming `needle`, then the connection closed.
    pub fn expect_error_and_close(&mut self, needle: &str) -> String {
        let message = match self.recv() {
            Some(Message::Error { message }) => message,
            other => panic!("expected an error about '{needle}', got {other:?}"),
        };
        assert!(
            message.contains(needle),
            "error '{message}' does not mention '{needle}'"
        );
        self.expect_closed();
        message
    }

    /// Expects the agent to close the connection (within 15 s).
    pub fn expect_closed(&mut self) {
        while let Some(m) = self.recv() {
            assert!(
                matches!(m, Message::Error { .. }),
                "expected the connection closed, got {m:?}"
            );
        }
    }
}
