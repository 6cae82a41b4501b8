//! Sockets under a whole deadline, for every setup step that waits on a
//! peer (accepting, reading a preamble, a handshake), and the one way to
//! compare a token.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use socket2::{SockAddr, Socket};

use super::WorkloadError;

/// Constant-time comparison (`subtle`), so the token cannot be guessed
/// byte by byte from response times.
pub fn token_matches(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

/// Accepts one connection on `listener`, waiting at most until `deadline`:
/// None once it has passed. A wait that times out or is interrupted
/// before then waits again; `what` names the connection in an error
/// ("a data connection").
pub fn accept_until(
    listener: &Socket,
    deadline: Instant,
    what: &str,
) -> Result<Option<(Socket, SockAddr)>, WorkloadError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        listener
            .set_read_timeout(Some(left))
            .map_err(WorkloadError::io(format!("setting the timeout for accepting {what}")))?;
        match listener.accept() {
            Ok(pair) => return Ok(Some(pair)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(WorkloadError::io(format!("accepting {what}"))(e)),
        }
    }
}

/// A socket read and written under one whole deadline: each call waits at
/// most what is left of it, and none starts once it has passed. A peer
/// that sends one byte at a time gains nothing by it.
pub struct Deadlined<'a> {
    socket: &'a Socket,
    deadline: Instant,
}

impl<'a> Deadlined<'a> {
    pub fn new(socket: &'a Socket, deadline: Instant) -> Deadlined<'a> {
        Deadlined { socket, deadline }
    }

    /// What is left, never zero (a zero timeout would block for ever);
    /// TimedOut once the deadline has passed.
    fn left(&self) -> std::io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the setup deadline passed",
            ));
        }
        Ok(left.max(Duration::from_millis(1)))
    }

    /// Clears the timeouts this left on the socket, for the test's loops.
    pub fn clear(&self) -> std::io::Result<()> {
        self.socket.set_read_timeout(None)?;
        self.socket.set_write_timeout(None)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.socket.set_read_timeout(Some(self.left()?))?;
        let mut socket: &Socket = self.socket;
        socket.read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.socket.set_write_timeout(Some(self.left()?))?;
        let mut socket: &Socket = self.socket;
        socket.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads exactly `buf.len()` bytes; Ok(false) on a clean end of stream
/// before the first byte, an error if it ends part-way.
pub fn read_full(mut from: impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match from.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}
