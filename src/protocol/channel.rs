//! A framed control connection on a blocking `TcpStream`, with a deadline on
//! every receive so a silent or slow peer can never hold a thread forever.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::framing::{encode, Decoder};
use super::{Message, ProtocolError};

/// A control connection.
#[derive(Debug)]
pub struct Channel {
    stream: TcpStream,
    decoder: Decoder,
}

impl Channel {
    pub fn new(stream: TcpStream, max_frame: u32) -> Channel {
        let _ = stream.set_nodelay(true);
        Channel {
            stream,
            decoder: Decoder::new(max_frame),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends one message (with a write deadline, so a peer that stops
    /// reading cannot block us forever).
    pub fn send(&mut self, message: &Message) -> Result<(), ProtocolError> {
        self.stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        self.stream.write_all(&encode(message))?;
        Ok(())
    }

    /// Receives one message within `timeout`; `waiting_for` names what we
    /// expect, for the error message.
    pub fn recv(&mut self, timeout: Duration, waiting_for: &str) -> Result<Message, ProtocolError> {
        let deadline = Instant::now() + timeout;
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(message) = self.decoder.next_message()? {
                return Ok(message);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ProtocolError::Timeout {
                    seconds: timeout.as_secs_f64(),
                    waiting_for: waiting_for.to_string(),
                });
            }
            self.stream.set_read_timeout(Some(deadline - now))?;
            let want = self.decoder.wanted()?.min(chunk.len());
            match self.stream.read(&mut chunk[..want]) {
                Ok(0) => return Err(ProtocolError::Closed(waiting_for.to_string())),
                Ok(n) => self.decoder.push(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    return Err(ProtocolError::Closed(waiting_for.to_string()))
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    pub fn try_clone(&self) -> std::io::Result<TcpStream> {
        self.stream.try_clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn silent_peer_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut channel = Channel::new(server, 1024);
        let err = channel.recv(Duration::from_millis(100), "hello").unwrap_err();
        assert!(matches!(err, ProtocolError::Timeout { .. }), "{err}");
    }

    #[test]
    fn truncated_frame_times_out_instead_of_hanging() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(&100u32.to_be_bytes()).unwrap();
        client.write_all(b"{\"type\"").unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut channel = Channel::new(server, 1024);
        let err = channel.recv(Duration::from_millis(200), "hello").unwrap_err();
        assert!(matches!(err, ProtocolError::Timeout { .. }), "{err}");
    }

    #[test]
    fn messages_cross_a_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut a = Channel::new(TcpStream::connect(addr).unwrap(), 1024);
        let mut b = Channel::new(listener.accept().unwrap().0, 1024);
        a.send(&Message::Start).unwrap();
        assert_eq!(b.recv(Duration::from_secs(1), "start").unwrap(), Message::Start);
        drop(a);
        assert!(matches!(
            b.recv(Duration::from_secs(1), "done"),
            Err(ProtocolError::Closed(_))
        ));
    }
}
