//! A framed control connection on a blocking `TcpStream`, with a deadline on
//! every receive so a silent or slow peer can never hold a thread forever.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
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

    /// Where the peer's end stands, without reading or waiting.
    pub fn peer_state(&self) -> PeerState {
        peer_state(&self.stream)
    }
}

/// Where the other end of a connection stands, seen without reading from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Open, nothing unread.
    Quiet,
    /// Open or not, bytes wait to be read first.
    Unread,
    /// Closed by the peer (end of stream), or the connection failed.
    Closed,
}

/// Where the other end of `stream` stands; consumes nothing.
pub fn peer_state(stream: &TcpStream) -> PeerState {
    let mut byte = 0u8;
    // SAFETY: a valid socket and a one-byte buffer; MSG_PEEK consumes nothing.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => PeerState::Closed,
        n if n > 0 => PeerState::Unread,
        _ => match std::io::Error::last_os_error().kind() {
            ErrorKind::WouldBlock | ErrorKind::Interrupted => PeerState::Quiet,
            _ => PeerState::Closed,
        },
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

    #[test]
    fn the_peer_state_is_seen_without_reading() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut a = Channel::new(TcpStream::connect(addr).unwrap(), 1024);
        let mut b = Channel::new(listener.accept().unwrap().0, 1024);
        assert_eq!(b.peer_state(), PeerState::Quiet);
        a.send(&Message::Start).unwrap();
        drop(a);
        // The message comes first, and is still there to read.
        let unread = Instant::now() + Duration::from_secs(10);
        while b.peer_state() == PeerState::Quiet && Instant::now() < unread {
            std::thread::yield_now();
        }
        assert_eq!(b.peer_state(), PeerState::Unread);
        assert_eq!(b.recv(Duration::from_secs(1), "start").unwrap(), Message::Start);
        assert_eq!(b.peer_state(), PeerState::Closed);
    }
}
