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
    let body = serde_json::to_vec(message).expect("messages always serialize");
    let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
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
        if self.buffer.len() < HEADER_LEN {
            return Ok(None);
        }
        let length = self.announced_length()? as usize;
        if self.buffer.len() < HEADER_LEN + length {
            return Ok(None);
        }
        let message = decode_body(&self.buffer[HEADER_LEN..HEADER_LEN + length]);
        self.buffer.drain(..HEADER_LEN + length);
        message.map(Some)
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
            Message::Hello(Hello::ours()),
            Message::Ready,
            Message::Start,
            Message::Busy { seconds_left: 3.5 },
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
