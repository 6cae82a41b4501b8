//! Length-prefixed JSON frames, without I/O.
//!
//! [`encode`] turns a message into bytes; [`Decoder`] takes bytes as they
//! arrive, in pieces of any size, and yields whole messages. The length is
//! checked against the decoder's limit before the body is buffered.

use super::{Message, ProtocolError};

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// Serializes `message` into one frame.
pub fn encode(message: &Message) -> Vec<u8> {
    frame(&body(message), &[])
}

/// The JSON body of `message`.
pub fn body(message: &Message) -> Vec<u8> {
    serde_json::to_vec(message).expect("messages always serialize")
}

/// One frame of `body` followed by `trailer` (a sealed frame's tag; empty
/// for a plain frame): the length covers both.
pub fn frame(body: &[u8], trailer: &[u8]) -> Vec<u8> {
    let length = body.len() + trailer.len();
    let mut frame = Vec::with_capacity(HEADER_LEN + length);
    frame.extend_from_slice(&(length as u32).to_be_bytes());
    frame.extend_from_slice(body);
    frame.extend_from_slice(trailer);
    frame
}

/// Parses one frame body.
pub fn decode_body(body: &[u8]) -> Result<Message, ProtocolError> {
    serde_json::from_slice(body).map_err(|e| ProtocolError::Malformed(e.to_string()))
}

/// Incremental frame decoder.
#[derive(Debug)]
pub struct Decoder {
    limit: u32,
    buffer: Vec<u8>,
}

impl Decoder {
    pub fn new(limit: u32) -> Decoder {
        Decoder {
            limit,
            buffer: Vec::new(),
        }
    }

    /// How many more bytes are needed before [`Decoder::next_message`] can
    /// make progress; never more than the header or the announced body.
    pub fn wanted(&self) -> Result<usize, ProtocolError> {
        if self.buffer.len() < HEADER_LEN {
            return Ok(HEADER_LEN - self.buffer.len());
        }
        let length = self.announced_length()?;
        Ok((HEADER_LEN + length as usize).saturating_sub(self.buffer.len()))
    }

    fn announced_length(&self) -> Result<u32, ProtocolError> {
        let length = u32::from_be_bytes(self.buffer[..HEADER_LEN].try_into().unwrap());
        if length > self.limit {
            return Err(ProtocolError::FrameTooLarge {
                length,
                limit: self.limit,
            });
        }
        Ok(length)
    }

    /// Appends received bytes. Callers feed at most [`Decoder::wanted`]
    /// bytes at a time, so the buffer never grows past one frame.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole message, if one is buffered.
    pub fn next_message(&mut self) -> Result<Option<Message>, ProtocolError> {
        match self.next_frame()? {
            Some(frame) => decode_body(&frame[HEADER_LEN..]).map(Some),
            None => Ok(None),
        }
    }

    /// The next whole frame, length prefix included, if one is buffered
    /// (a sealed channel checks its tag before decoding the body).
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, ProtocolError> {
        if self.buffer.len() < HEADER_LEN {
            return Ok(None);
        }
        let length = self.announced_length()? as usize;
        if self.buffer.len() < HEADER_LEN + length {
            return Ok(None);
        }
        Ok(Some(self.buffer.drain(..HEADER_LEN + length).collect()))
    }

    /// Bytes buffered but not yet decoded (part of a frame).
    pub fn pending(&self) -> usize {
        self.buffer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Hello;

    fn messages() -> Vec<Message> {
        vec![
            Message::Hello(Hello::ours(["tcp"])),
            Message::Ready,
            Message::Start,
            Message::Busy {
                seconds_left: 3.5,
                running_seconds: None,
            },
            Message::Error { message: "no".into() },
        ]
    }

    #[test]
    fn frames_round_trip_when_fed_byte_by_byte() {
        let mut bytes = Vec::new();
        for m in messages() {
            bytes.extend(encode(&m));
        }
        let mut decoder = Decoder::new(1024);
        let mut out = Vec::new();
        for b in bytes {
            decoder.push(&[b]);
            if let Some(m) = decoder.next_message().unwrap() {
                out.push(m);
            }
        }
        assert_eq!(out, messages());
        assert_eq!(decoder.pending(), 0);
    }

    #[test]
    fn oversized_length_is_refused_before_buffering_the_body() {
        let mut decoder = Decoder::new(1024);
        decoder.push(&0xFFFF_FFFFu32.to_be_bytes());
        assert!(matches!(
            decoder.wanted(),
            Err(ProtocolError::FrameTooLarge {
                length: 0xFFFF_FFFF,
                limit: 1024
            })
        ));
        assert!(decoder.next_message().is_err());
    }

    #[test]
    fn wanted_never_exceeds_the_frame() {
        let frame = encode(&Message::Ready);
        let mut decoder = Decoder::new(1024);
        assert_eq!(decoder.wanted().unwrap(), 4);
        decoder.push(&frame[..4]);
        assert_eq!(decoder.wanted().unwrap(), frame.len() - 4);
    }

    #[test]
    fn invalid_json_and_unknown_types_are_malformed() {
        for body in [
            &b"{not json"[..],
            br#"{"type":"launch_missiles"}"#,
            br#"{"type":"busy","seconds_left":"soon"}"#,
            b"",
        ] {
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(body);
            let mut decoder = Decoder::new(1024);
            decoder.push(&frame);
            assert!(
                matches!(decoder.next_message(), Err(ProtocolError::Malformed(_))),
                "{body:?}"
            );
        }
    }
}

/// Property tests: any message survives any split of its bytes, and no
/// byte sequence makes the decoder panic, hang or buffer past its limit.
#[cfg(test)]
mod properties {
    use super::*;
    use crate::protocol::Hello;
    use proptest::prelude::*;

    const LIMIT: u32 = 4096;

    /// Exact binary fractions, so the JSON round trip is exact.
    fn seconds() -> impl Strategy<Value = f64> {
        (0u32..10_000_000).prop_map(|n| f64::from(n) / 8.0)
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (
                ".{0,40}",
                any::<u32>(),
                proptest::collection::vec("[a-z_]{1,12}", 0..4),
                any::<bool>()
            )
                .prop_map(
                    |(magic, protocol_version, workloads, auth_required)| Message::Hello(Hello {
                        magic,
                        protocol_version,
                        software_version: "0.1.0".into(),
                        workloads,
                        auth_required,
                        features: vec!["links".into()],
                    })
                ),
            Just(Message::Ready),
            Just(Message::Start),
            Just(Message::AddressesRequest),
            Just(Message::Stop { reason: None }),
            ".{0,40}".prop_map(|r| Message::Stop { reason: Some(r) }),
            (seconds(), proptest::option::of(seconds())).prop_map(|(seconds_left, running_seconds)| Message::Busy {
                seconds_left,
                running_seconds
            }),
            (any::<u32>(), seconds()).prop_map(|(position, seconds_left)| Message::Queued { position, seconds_left }),
            "\\PC{0,200}".prop_map(|message| Message::Error { message }),
            "[0-9a-f]{0,64}".prop_map(|nonce| Message::AuthChallenge { nonce }),
            ("[0-9a-f]{64}", "[0-9a-f]{64}").prop_map(|(nonce, mac)| Message::AuthResponse { nonce, mac }),
            any::<i64>().prop_map(|sent_ns| Message::ClockRequest { sent_ns }),
            (any::<i64>(), any::<i64>(), any::<i64>()).prop_map(|(client_sent_ns, received_ns, sent_ns)| {
                Message::ClockReply {
                    client_sent_ns,
                    received_ns,
                    sent_ns,
                }
            }),
        ]
    }

    /// Feeds `bytes` the way `Channel::recv` does (never more than
    /// `wanted`, in pieces of at most `piece`), collecting what comes out.
    fn feed(decoder: &mut Decoder, bytes: &[u8], piece: usize) -> (Vec<Message>, Option<ProtocolError>) {
        let mut out = Vec::new();
        let mut rest = bytes;
        loop {
            match decoder.next_message() {
                Ok(Some(m)) => {
                    out.push(m);
                    continue;
                }
                Ok(None) => {}
                Err(e) => return (out, Some(e)),
            }
            let want = match decoder.wanted() {
                Ok(w) => w,
                Err(e) => return (out, Some(e)),
            };
            assert!(want > 0, "the decoder asked for nothing while a frame was incomplete");
            if rest.is_empty() {
                return (out, None);
            }
            let n = want.min(piece).min(rest.len());
            decoder.push(&rest[..n]);
            // Fed only what it asks for, the decoder holds at most the
            // frame it is in: its header, then no byte past the body the
            // header announced (none past a header over the limit).
            let frame = match decoder.pending() {
                n if n < HEADER_LEN => HEADER_LEN,
                _ => HEADER_LEN + decoder.announced_length().map_or(0, |l| l as usize),
            };
            assert!(
                decoder.pending() <= frame,
                "{} buffered in a frame of {frame}",
                decoder.pending()
            );
            assert!(frame <= HEADER_LEN + decoder.limit as usize);
            rest = &rest[n..];
        }
    }

    proptest! {
        #[test]
        fn any_messages_survive_any_split(messages in proptest::collection::vec(message(), 1..8), piece in 1usize..64) {
            let bytes: Vec<u8> = messages.iter().flat_map(encode).collect();
            let mut decoder = Decoder::new(1 << 20);
            let (out, error) = feed(&mut decoder, &bytes, piece);
            prop_assert!(error.is_none(), "{error:?}");
            prop_assert_eq!(out, messages);
            prop_assert_eq!(decoder.pending(), 0);
        }

        #[test]
        fn random_bytes_never_panic_or_overbuffer(bytes in proptest::collection::vec(any::<u8>(), 0..2048), piece in 1usize..512) {
            let mut decoder = Decoder::new(LIMIT);
            let _ = feed(&mut decoder, &bytes, piece);
        }

        /// Frames of random bodies whose headers announce lengths on both
        /// sides of a small limit: what is under it is buffered to its end
        /// and no further (`feed` checks the bound after every push), what
        /// is over it is refused from the header, and input that runs out
        /// leaves less than one frame buffered.
        #[test]
        fn announced_lengths_around_the_limit_never_overbuffer(
            frames in proptest::collection::vec((0u32..128, proptest::collection::vec(any::<u8>(), 0..160)), 1..6),
            piece in 1usize..512,
        ) {
            const SMALL: u32 = 64;
            let bytes: Vec<u8> = frames
                .iter()
                .flat_map(|(length, body)| length.to_be_bytes().into_iter().chain(body.iter().copied()))
                .collect();
            let mut decoder = Decoder::new(SMALL);
            let (_, error) = feed(&mut decoder, &bytes, piece);
            if matches!(error, Some(ProtocolError::FrameTooLarge { .. })) {
                prop_assert!(frames.iter().any(|(length, _)| *length > SMALL));
            }
            if error.is_none() {
                prop_assert!(decoder.pending() < HEADER_LEN + SMALL as usize);
            }
        }

        #[test]
        fn a_length_over_the_limit_is_refused_from_the_header_alone(length in (LIMIT + 1)..=u32::MAX) {
            let mut decoder = Decoder::new(LIMIT);
            decoder.push(&length.to_be_bytes());
            let refused = matches!(decoder.wanted(), Err(ProtocolError::FrameTooLarge { .. }));
            prop_assert!(refused);
            prop_assert!(decoder.next_message().is_err());
        }

        #[test]
        fn a_truncated_frame_yields_nothing_and_asks_for_the_rest(message in message(), cut in 0usize..1000) {
            let frame = encode(&message);
            let cut = cut % frame.len();
            let mut decoder = Decoder::new(1 << 20);
            decoder.push(&frame[..cut]);
            prop_assert!(decoder.next_message().unwrap().is_none());
            prop_assert_eq!(decoder.wanted().unwrap(), if cut < HEADER_LEN { HEADER_LEN - cut } else { frame.len() - cut });
        }

        #[test]
        fn mutated_frames_are_decoded_or_refused_never_panic(
            message in message(),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        ) {
            let mut frame = encode(&message);
            for (at, byte) in flips {
                let i = at % frame.len();
                frame[i] ^= byte;
            }
            let mut decoder = Decoder::new(LIMIT);
            let _ = feed(&mut decoder, &frame, 7);
        }
    }
}
