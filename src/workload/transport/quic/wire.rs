//! A QUIC stream as a [`Wire`]: each read and write drives the end's
//! runtime on the calling thread until it is done (see [`Driver`]), so a
//! message loop written for a socket runs over QUIC unchanged.

use std::io::{self, Read, Write};
use std::time::Duration;

use super::endpoint::closed_when_done;
use super::endpoint::Driver;
use crate::workload::transport::wire::Wire;

/// Both halves of a QUIC stream and the runtime that drives them.
pub struct QuicWire<'a> {
    driver: &'a Driver,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    read_timeout: Option<Duration>,
}

impl<'a> QuicWire<'a> {
    pub fn new(driver: &'a Driver, send: quinn::SendStream, recv: quinn::RecvStream) -> QuicWire<'a> {
        QuicWire {
            driver,
            send,
            recv,
            read_timeout: None,
        }
    }
}

impl Read for QuicWire<'_> {
    /// Some bytes, or 0 at the stream's end or the peer's close once done.
    /// A read that times out loses nothing: quinn keeps what arrived.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (recv, timeout) = (&mut self.recv, self.read_timeout);
        self.driver.block_on(async move {
            let got = match timeout {
                Some(t) => tokio::time::timeout(t, recv.read(buf))
                    .await
                    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?,
                None => recv.read(buf).await,
            };
            match got {
                Ok(Some(n)) => Ok(n),
                Ok(None) => Ok(0),
                Err(quinn::ReadError::ConnectionLost(e)) if closed_when_done(&e) => Ok(0),
                Err(quinn::ReadError::Reset(code)) => Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    format!("the peer reset the stream (code {code})"),
                )),
                Err(e) => Err(io::Error::other(e)),
            }
        })
    }
}

impl Write for QuicWire<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let send = &mut self.send;
        self.driver.block_on(send.write(buf)).map_err(|e| match e {
            quinn::WriteError::Stopped(code) => io::Error::new(
                io::ErrorKind::ConnectionReset,
                format!("the peer stopped the stream (code {code})"),
            ),
            e => io::Error::other(e),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Wire for QuicWire<'_> {
    fn close_write(&mut self) {
        let _ = self.send.finish();
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.read_timeout = timeout;
    }
}
