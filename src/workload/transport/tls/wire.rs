//! A TLS connection and its socket as one `Read + Write`, for workloads
//! that exchange messages (rr, sweep) rather than stream bulk: a read opens as
//! many records as it takes to give some plaintext, a write seals and
//! sends at once. The socket's timeouts apply to both, as on a plain socket.

use std::io::{self, Read, Write};

use socket2::Socket;

use super::session::Session;
use super::TlsEnd;
use crate::workload::transport::wire::Wire;

/// A TLS session over its socket.
pub struct TlsIo<'a> {
    connection: rustls::Connection,
    socket: &'a Socket,
    /// What the handshake settled on, for the stream end's record.
    pub end: TlsEnd,
}

impl<'a> TlsIo<'a> {
    pub fn new(session: Session, socket: &'a Socket) -> TlsIo<'a> {
        TlsIo {
            connection: session.connection,
            socket,
            end: session.end,
        }
    }

    /// How long a read waits from now on (the socket's timeout).
    pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) {
        let _ = self.socket.set_read_timeout(timeout);
    }

    /// Sends close_notify and shuts the write side: the peer reads a clean end.
    pub fn close_write(&mut self) {
        self.connection.send_close_notify();
        let _ = self.flush();
        let _ = self.socket.shutdown(std::net::Shutdown::Write);
    }
}

impl Read for TlsIo<'_> {
    /// Some plaintext, or 0 at the peer's close_notify or when the
    /// connection closed without one (a requester that reset it).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.connection.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let mut socket = self.socket;
            let got = self.connection.read_tls(&mut socket)?;
            self.connection
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            // An alert or a key update's answer.
            self.flush()?;
            if got == 0 {
                // The connection closed: whatever was opened, then the end.
                return match self.connection.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(_) => Ok(0),
                };
            }
        }
    }
}

impl Write for TlsIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.connection.writer().write(buf)?;
        self.flush()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut socket = self.socket;
        while self.connection.wants_write() {
            self.connection.write_tls(&mut socket)?;
        }
        Ok(())
    }
}

impl Wire for TlsIo<'_> {
    fn close_write(&mut self) {
        TlsIo::close_write(self)
    }

    fn set_read_timeout(&mut self, timeout: Option<std::time::Duration>) {
        TlsIo::set_read_timeout(self, timeout)
    }
}
