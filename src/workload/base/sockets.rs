//! Sockets under a whole deadline, for every setup step that waits on a
//! peer (accepting, reading a preamble, a handshake), and the one way to
//! compare a token.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{SockAddr, Socket};

use super::WorkloadError;

/// Constant-time comparison (`subtle`), so the token cannot be guessed
/// byte by byte from response times.
pub fn token_matches(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

/// Whether `socket` becomes readable within `wait` (a connection to
/// accept, data, an error or a shutdown), waiting in poll(2) at least a
/// millisecond.
pub fn readable_within(socket: &Socket, wait: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = wait.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut fd, 1, ms) > 0 }
}

/// Accepts one connection on `listener`, waiting at most until `deadline`:
/// None once it has passed; `what` names the connection in an error ("a
/// data connection"). It waits in poll(2), not in accept under the
/// listener's receive timeout: an MPTCP listener's accept does not heed
/// SO_RCVTIMEO (Linux 6.18), so a client that never connected its streams
/// held the agent there past every deadline. The listener is non-blocking
/// while it takes the connection, so one gone before the accept costs
/// another wait, not a hang.
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
        if !readable_within(listener, left) {
            continue;
        }
        listener
            .set_nonblocking(true)
            .map_err(WorkloadError::io(format!("waiting for {what}")))?;
        let accepted = listener.accept();
        let _ = listener.set_nonblocking(false);
        match accepted {
            // Linux: the accepted socket does not inherit O_NONBLOCK.
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
/// most what is left of it (give or take [`TIMEOUT_KEPT`]), and none
/// starts once it has passed. A peer that sends one byte at a time gains
/// nothing by it.
pub struct Deadlined<'a> {
    socket: &'a Socket,
    deadline: Instant,
    /// When the socket's receive and send timeouts were last set.
    read_set: Option<Instant>,
    write_set: Option<Instant>,
}

/// How long a timeout set on the socket serves the calls after it before
/// it is set again to what is left: a call may wait this much past the
/// deadline, and a handshake's several reads and writes on a fast path
/// cost one setsockopt(2) each way, not one per call (a connection per
/// transaction pays it every time).
pub const TIMEOUT_KEPT: Duration = Duration::from_millis(10);

impl<'a> Deadlined<'a> {
    pub fn new(socket: &'a Socket, deadline: Instant) -> Deadlined<'a> {
        Deadlined {
            socket,
            deadline,
            read_set: None,
            write_set: None,
        }
    }

    /// What is left, never zero (a zero timeout would block for ever);
    /// TimedOut once the deadline has passed.
    fn left(&self, now: Instant) -> std::io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the setup deadline passed",
            ));
        }
        Ok(left.max(Duration::from_millis(1)))
    }

    /// Sets one direction's timeout to what is left, unless it was set
    /// less than [`TIMEOUT_KEPT`] ago; TimedOut past the deadline.
    fn arm(&mut self, write: bool) -> std::io::Result<()> {
        let now = Instant::now();
        let left = self.left(now)?;
        let set = if write { &mut self.write_set } else { &mut self.read_set };
        if set.is_some_and(|at| now.saturating_duration_since(at) < TIMEOUT_KEPT) {
            return Ok(());
        }
        match write {
            true => self.socket.set_write_timeout(Some(left))?,
            false => self.socket.set_read_timeout(Some(left))?,
        }
        *set = Some(now);
        Ok(())
    }

    /// Clears the timeouts this left on the socket, for the test's loops.
    pub fn clear(&self) -> std::io::Result<()> {
        self.socket.set_read_timeout(None)?;
        self.socket.set_write_timeout(None)
    }
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.arm(false)?;
        let mut socket: &Socket = self.socket;
        socket.read(buf)
    }
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.arm(true)?;
        let mut socket: &Socket = self.socket;
        socket.write(buf)
    }

    /// One sendmsg(2) for all of `bufs`: rustls hands a handshake's
    /// flight over as several records at once, and without this each
    /// went out in a call and a segment of its own (three for a TLS 1.3
    /// server's first flight).
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        self.arm(true)?;
        let mut socket: &Socket = self.socket;
        socket.write_vectored(bufs)
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

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};

    /// A listener on 127.0.0.1 of `protocol`, or None where this kernel
    /// has none (MPTCP off).
    fn listener(protocol: Protocol) -> Option<Socket> {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(protocol)).ok()?;
        socket
            .bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into())
            .unwrap();
        socket.listen(4).unwrap();
        Some(socket)
    }

    #[test]
    fn with_nobody_connecting_the_wait_ends_at_the_deadline_over_tcp_and_mptcp() {
        // An MPTCP listener's accept ignored the receive timeout this waited
        // with before: the test hung (nextest's timeout ends it as a failure).
        let mptcp = listener(Protocol::from(libc::IPPROTO_MPTCP));
        if mptcp.is_none() {
            crate::probe::skip_or_fail("this kernel opens no MPTCP socket (net.mptcp.enabled=0?)");
        }
        for socket in [listener(Protocol::TCP), mptcp].into_iter().flatten() {
            let deadline = Instant::now() + Duration::from_millis(200);
            assert!(accept_until(&socket, deadline, "a test connection").unwrap().is_none());
            assert!(Instant::now() >= deadline, "returned before its deadline");
        }
    }

    #[test]
    fn a_connection_that_comes_is_taken_and_both_sockets_stay_blocking() {
        let socket = listener(Protocol::TCP).unwrap();
        let port = socket.local_addr().unwrap().as_socket().unwrap().port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, _) = accept_until(&socket, Instant::now() + Duration::from_secs(5), "a test connection")
            .unwrap()
            .expect("the connection came");
        // Both blocking again: the listener as it was, the connection as
        // accept(2) makes it.
        let blocking = |s: &Socket| {
            // SAFETY: F_GETFL reads the descriptor's flags.
            let flags = unsafe { libc::fcntl(s.as_raw_fd(), libc::F_GETFL) };
            flags >= 0 && flags & libc::O_NONBLOCK == 0
        };
        assert!(blocking(&socket) && blocking(&accepted));
    }

    /// A vectored write goes out whole in one call (the default
    /// `write_vectored` writes only the first slice); only the direction
    /// used gets a timeout, and both are cleared; past the deadline
    /// nothing starts.
    #[test]
    fn a_vectored_write_is_one_call_and_the_deadline_still_holds() {
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM, None).unwrap();
        let mut io = Deadlined::new(&a, Instant::now() + Duration::from_secs(5));
        let slices = [&b"first"[..], b" ", b"second"];
        let bufs: Vec<_> = slices.iter().map(|s| std::io::IoSlice::new(s)).collect();
        assert_eq!(io.write_vectored(&bufs).unwrap(), 12, "every slice in one call");
        assert!(io.write_set.is_some() && io.read_set.is_none());
        io.write_all(b"!").unwrap();
        let timeout = a.write_timeout().unwrap().expect("a send timeout on the socket");
        assert!(
            timeout <= Duration::from_secs(5) && timeout > Duration::ZERO,
            "{timeout:?}"
        );
        let mut got = [0u8; 13];
        let mut reader = Deadlined::new(&b, Instant::now() + Duration::from_secs(5));
        reader.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"first second!");
        io.clear().unwrap();
        assert_eq!((a.read_timeout().unwrap(), a.write_timeout().unwrap()), (None, None));

        let mut late = Deadlined::new(&b, Instant::now() - Duration::from_millis(1));
        let err = late.read(&mut got).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        let err = late.write(b"x").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    }
}
