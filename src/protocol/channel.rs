//! A framed control connection on a blocking `TcpStream`, with a deadline on
//! every receive so a silent or slow peer can never hold a thread forever.
//!
//! Until the key proof, the channel keeps a digest of the frames each way
//! (the [`Transcript`] the proof binds). After it, a keyed session is
//! *sealed* ([`Channel::seal`]): every frame carries a tag over its
//! direction, its sequence number and its body ([`SessionKey::tag`]), and a
//! frame whose tag does not verify (changed, injected, replayed, dropped
//! before it or reordered) ends the connection with
//! [`ProtocolError::Forged`] before its body is read.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::auth::{End, SessionKey, Transcript, TAG_LEN};
use super::framing::{self, decode_body, Decoder, HEADER_LEN};
use super::{Message, ProtocolError};

/// A control connection.
#[derive(Debug)]
pub struct Channel {
    stream: TcpStream,
    decoder: Decoder,
    /// Digests of every frame sent and received until the channel is sealed.
    sent: Sha256,
    received: Sha256,
    seal: Option<Seal>,
}

/// A sealed channel's key and the next sequence number each way.
#[derive(Debug)]
struct Seal {
    key: SessionKey,
    ours: End,
    sent: u64,
    received: u64,
}

impl Channel {
    pub fn new(stream: TcpStream, max_frame: u32) -> Channel {
        let _ = stream.set_nodelay(true);
        Channel {
            stream,
            decoder: Decoder::new(max_frame),
            sent: Sha256::new(),
            received: Sha256::new(),
            seal: None,
        }
    }

    /// The digests of the frames each way so far, seen from `ours` end.
    pub fn transcript(&self, ours: End) -> Transcript {
        let sent: [u8; 32] = self.sent.clone().finalize().into();
        let received: [u8; 32] = self.received.clone().finalize().into();
        match ours {
            End::Client => Transcript {
                client_to_agent: sent,
                agent_to_client: received,
            },
            End::Agent => Transcript {
                client_to_agent: received,
                agent_to_client: sent,
            },
        }
    }

    /// From now on every frame either way carries a tag under `key`; this
    /// end is `ours`. Both ends seal right after the key proof: the agent
    /// once it has sent `auth_ok`, the client once it has checked it.
    pub fn seal(&mut self, key: SessionKey, ours: End) {
        self.seal = Some(Seal {
            key,
            ours,
            sent: 0,
            received: 0,
        });
    }

    /// True once [`Channel::seal`] was called.
    pub fn is_sealed(&self) -> bool {
        self.seal.is_some()
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends one message (with a write deadline, so a peer that stops
    /// reading cannot block us forever).
    pub fn send(&mut self, message: &Message) -> Result<(), ProtocolError> {
        let body = framing::body(message);
        let frame = match &mut self.seal {
            Some(seal) => {
                let tag = seal.key.tag(seal.ours, seal.sent, &body);
                seal.sent += 1;
                framing::frame(&body, &tag)
            }
            None => {
                let frame = framing::frame(&body, &[]);
                self.sent.update(&frame);
                frame
            }
        };
        self.stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        self.stream.write_all(&frame)?;
        Ok(())
    }

    /// The message of one whole frame: its tag checked first when sealed.
    fn open(&mut self, frame: Vec<u8>) -> Result<Message, ProtocolError> {
        let Some(seal) = &mut self.seal else {
            self.received.update(&frame);
            return decode_body(&frame[HEADER_LEN..]);
        };
        let from = seal.ours.peer();
        let sealed = &frame[HEADER_LEN..];
        let forged = ProtocolError::Forged {
            from: from.name(),
            sequence: seal.received,
        };
        let Some(split) = sealed.len().checked_sub(TAG_LEN) else {
            return Err(forged);
        };
        let (body, tag) = sealed.split_at(split);
        if !seal.key.verify(from, seal.received, body, tag) {
            return Err(forged);
        }
        seal.received += 1;
        decode_body(body)
    }

    /// Receives one message within `timeout`; `waiting_for` names what we
    /// expect, for the error message.
    pub fn recv(&mut self, timeout: Duration, waiting_for: &str) -> Result<Message, ProtocolError> {
        let deadline = Instant::now() + timeout;
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                return self.open(frame);
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

    /// Two sealed ends of one loopback connection, and a raw writer into
    /// the agent's end (what a relay in the middle can do) with the key
    /// the client seals with, to forge frames only a holder of it could.
    fn sealed_pair() -> (Channel, Channel, TcpStream, SessionKey) {
        use crate::protocol::auth::{Handshake, Psk, DIGEST_LEN};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).unwrap();
        let raw = client.try_clone().unwrap();
        let mut client = Channel::new(client, 1024);
        let mut agent = Channel::new(listener.accept().unwrap().0, 1024);
        let psk = Psk::from_bytes(b"0123456789abcdef0123456789abcdef");
        let transcript = Transcript {
            client_to_agent: [0; DIGEST_LEN],
            agent_to_client: [0; DIGEST_LEN],
        };
        let shake = Handshake {
            agent_nonce: b"agent",
            client_nonce: b"client",
            transcript: &transcript,
        };
        client.seal(psk.session_key(&shake), End::Client);
        agent.seal(psk.session_key(&shake), End::Agent);
        (client, agent, raw, psk.session_key(&shake))
    }

    /// A frame of `message` sealed as the client's number `sequence`.
    fn forged(key: &SessionKey, sequence: u64, message: &Message) -> Vec<u8> {
        let body = framing::body(message);
        framing::frame(&body, &key.tag(End::Client, sequence, &body))
    }

    fn refused_as_forged(agent: &mut Channel, sequence: u64) {
        match agent.recv(Duration::from_secs(10), "a frame") {
            Err(ProtocolError::Forged { from, sequence: s }) => assert_eq!((from, s), ("client", sequence)),
            other => panic!("a bad frame was taken: {other:?}"),
        }
    }

    #[test]
    fn sealed_frames_cross_both_ways_in_order() {
        let (mut client, mut agent, _, _) = sealed_pair();
        for _ in 0..3 {
            client.send(&Message::Start).unwrap();
            assert_eq!(agent.recv(Duration::from_secs(10), "start").unwrap(), Message::Start);
            agent.send(&Message::Ready).unwrap();
            assert_eq!(client.recv(Duration::from_secs(10), "ready").unwrap(), Message::Ready);
        }
    }

    #[test]
    fn a_plain_frame_into_a_sealed_channel_is_forged() {
        let (_, mut agent, mut raw, _) = sealed_pair();
        raw.write_all(&framing::encode(&Message::FactsRequest)).unwrap();
        refused_as_forged(&mut agent, 0);
    }

    #[test]
    fn a_changed_frame_is_forged() {
        let (_, mut agent, mut raw, key) = sealed_pair();
        let mut frame = forged(&key, 0, &Message::Start);
        frame[HEADER_LEN + 3] ^= 0x20;
        raw.write_all(&frame).unwrap();
        refused_as_forged(&mut agent, 0);
    }

    #[test]
    fn a_replayed_frame_is_forged() {
        let (_, mut agent, mut raw, key) = sealed_pair();
        let frame = forged(&key, 0, &Message::Start);
        raw.write_all(&frame).unwrap();
        raw.write_all(&frame).unwrap();
        assert_eq!(agent.recv(Duration::from_secs(10), "start").unwrap(), Message::Start);
        refused_as_forged(&mut agent, 1);
    }

    #[test]
    fn a_dropped_or_reordered_frame_is_forged() {
        let (_, mut agent, mut raw, key) = sealed_pair();
        // Frame 0 never arrives: frame 1 is not taken in its place.
        raw.write_all(&forged(&key, 1, &Message::Start)).unwrap();
        refused_as_forged(&mut agent, 0);
    }

    #[test]
    fn a_frame_shorter_than_its_tag_is_forged() {
        let (_, mut agent, mut raw, _) = sealed_pair();
        raw.write_all(&framing::frame(b"{}", &[])).unwrap();
        refused_as_forged(&mut agent, 0);
    }

    #[test]
    fn the_agents_own_frame_reflected_back_is_forged() {
        let (_, mut agent, mut raw, key) = sealed_pair();
        let body = framing::body(&Message::Start);
        raw.write_all(&framing::frame(&body, &key.tag(End::Agent, 0, &body)))
            .unwrap();
        refused_as_forged(&mut agent, 0);
    }

    #[test]
    fn the_transcript_is_what_each_end_sent_and_received() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = Channel::new(TcpStream::connect(addr).unwrap(), 1024);
        let mut agent = Channel::new(listener.accept().unwrap().0, 1024);
        client.send(&Message::Start).unwrap();
        agent.recv(Duration::from_secs(10), "start").unwrap();
        agent.send(&Message::Ready).unwrap();
        agent.send(&Message::Ready).unwrap();
        client.recv(Duration::from_secs(10), "ready").unwrap();
        client.recv(Duration::from_secs(10), "ready").unwrap();
        assert_eq!(client.transcript(End::Client), agent.transcript(End::Agent));
        let before = agent.transcript(End::Agent);
        agent.send(&Message::Ready).unwrap();
        assert_ne!(agent.transcript(End::Agent), before);
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
