//! A connected stream of any transport as one `Read + Write`, for the
//! workloads that exchange messages rather than stream bulk (rr, sweep):
//! the socket itself ([`Plain`]), a TLS session over it
//! ([`super::tls::wire::TlsIo`]) or a QUIC stream
//! ([`super::quic::wire::QuicWire`]). A loop written against [`Wire`] runs
//! over each unchanged.

use std::io::{self, Read, Write};
use std::time::Duration;

use socket2::Socket;

/// What a message loop reads and writes through.
pub trait Wire: Read + Write {
    /// Ends the sending side: a FIN; close_notify and a FIN; or the
    /// stream's FIN.
    fn close_write(&mut self);
    /// How long a read waits from now on (None: for ever). A read that
    /// waited this long fails with `TimedOut` or `WouldBlock` and loses
    /// nothing: the next read goes on where it stopped.
    fn set_read_timeout(&mut self, timeout: Option<Duration>);
}

/// A plain stream socket (TCP, MPTCP).
pub struct Plain<'a>(pub &'a Socket);

impl Read for Plain<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut s = self.0;
        s.read(buf)
    }
}

impl Write for Plain<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.0;
        s.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Wire for Plain<'_> {
    fn close_write(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Write);
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        let _ = self.0.set_read_timeout(timeout);
    }
}

/// Whether a read failed only because its timeout ran out (or a signal
/// cut it short): nothing was lost, and it may be tried again.
pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
