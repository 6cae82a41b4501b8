//! Pre-shared-key authentication of the control connection, without I/O.
//!
//! Right after the hellos, an agent started with `--psk-file` sends
//! `auth_challenge {nonce}` (32 random bytes). The client answers
//! `auth_response {nonce, mac}` with its own fresh nonce and
//! `HMAC-SHA256(key, "nicbench-auth-v2 client" 0 agent_nonce client_nonce
//! H(client->agent) H(agent->client))`, where the H are SHA-256 digests of
//! the frames each way so far (the hellos and the challenge: the
//! [`Transcript`]), so a relay that rewrote a hello is caught here. The
//! agent checks the MAC in constant time and proves that it knows the key
//! too with `auth_ok {mac}` over `"nicbench-auth-v2 agent" 0` and the same
//! parts. Each side's nonce is fresh per connection, so a recorded answer
//! is worthless to an eavesdropper in either direction, and the labels keep
//! one side's MAC from being reflected as the other's.
//!
//! The proof alone would cover only the handshake: a relay could pass it
//! through and then replace the request. So both ends then derive a
//! [`SessionKey`] from the key, both nonces and the transcript, and every
//! later frame in both directions carries
//! `HMAC-SHA256(session key, direction label, sequence number, body)`
//! ([`SessionKey::tag`]; `protocol::channel` seals and opens the frames).
//! The key itself never crosses the wire and is never printed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of an HMAC-SHA256 tag.
pub const MAC_LEN: usize = 32;
/// Shortest key accepted: below this a key can be guessed offline.
pub const MIN_KEY_LEN: usize = 16;
/// Longest key file read (a key, not a document).
pub const MAX_KEY_LEN: usize = 4096;

const CLIENT_LABEL: &[u8] = b"nicbench-auth-v2 client\0";
const AGENT_LABEL: &[u8] = b"nicbench-auth-v2 agent\0";
const SESSION_LABEL: &[u8] = b"nicbench-session-v2\0";
/// The client's proof of releases before the session was sealed: over the
/// nonces alone. Only recognised, to tell an older client what to do.
const HANDSHAKE_ONLY_CLIENT_LABEL: &[u8] = b"nicbench-auth-v1 client\0";
/// Bytes of a SHA-256 digest.
pub const DIGEST_LEN: usize = 32;
/// Bytes of the tag a sealed frame carries after its body.
pub const TAG_LEN: usize = MAC_LEN;

/// Which end of the control connection a frame comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Client,
    Agent,
}

impl End {
    /// The other end.
    pub fn peer(self) -> End {
        match self {
            End::Client => End::Agent,
            End::Agent => End::Client,
        }
    }

    /// The label a frame's tag starts with: a frame one end sent cannot be
    /// reflected back to it as the other's.
    fn frame_label(self) -> &'static [u8] {
        match self {
            End::Client => b"nicbench-frame-v2 client\0",
            End::Agent => b"nicbench-frame-v2 agent\0",
        }
    }

    /// The end's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            End::Client => "client",
            End::Agent => "agent",
        }
    }
}

/// What both ends said before the key proof: a SHA-256 digest of the
/// frames (length and body, as sent) in each direction. Both ends compute
/// it, each from what it sent and received, and bind it into the proof and
/// the session key: a relay that changed a hello (its features, its
/// `auth_required`) makes the proof fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transcript {
    pub client_to_agent: [u8; DIGEST_LEN],
    pub agent_to_client: [u8; DIGEST_LEN],
}

/// The parts every proof and the session key are made of.
#[derive(Debug, Clone, Copy)]
pub struct Handshake<'a> {
    pub agent_nonce: &'a [u8],
    pub client_nonce: &'a [u8],
    pub transcript: &'a Transcript,
}

/// The key of one control session, derived from the pre-shared key, both
/// nonces and the transcript: it MACs every frame after the key proof.
/// Its `Debug` hides it; it is overwritten when dropped.
pub struct SessionKey([u8; MAC_LEN]);

impl Drop for SessionKey {
    fn drop(&mut self) {
        for byte in self.0.iter_mut() {
            // SAFETY: a valid, aligned &mut u8; volatile so it is not elided.
            unsafe { std::ptr::write_volatile(byte, 0) };
        }
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(<hidden>)")
    }
}

impl SessionKey {
    fn hmac(&self, from: End, sequence: u64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(from.frame_label());
        mac.update(&sequence.to_be_bytes());
        mac.update(body);
        mac
    }

    /// The tag of frame number `sequence` (from 0, per direction) that
    /// `from` sends with `body`.
    pub fn tag(&self, from: End, sequence: u64, body: &[u8]) -> [u8; TAG_LEN] {
        self.hmac(from, sequence, body).finalize().into_bytes().into()
    }

    /// Checks a frame's tag in constant time.
    pub fn verify(&self, from: End, sequence: u64, body: &[u8], tag: &[u8]) -> bool {
        self.hmac(from, sequence, body).verify_slice(tag).is_ok()
    }
}

/// Problems with the key file, named so the user can fix them.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the pre-shared key file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the pre-shared key in {path} is {length} bytes; use at least {MIN_KEY_LEN} \
         (e.g. '(umask 077; head -c 32 /dev/urandom | base64 > {path})')"
    )]
    TooShort { path: PathBuf, length: usize },
    #[error("the pre-shared key file {path} is larger than {MAX_KEY_LEN} bytes; it should hold one key")]
    TooLong { path: PathBuf },
}

/// A pre-shared key. Its `Debug` form hides the bytes, so it can sit in a
/// config that is logged; the bytes are overwritten when dropped.
#[derive(Clone)]
pub struct Psk(Arc<KeyBytes>);

struct KeyBytes(Vec<u8>);

impl Drop for KeyBytes {
    fn drop(&mut self) {
        for byte in self.0.iter_mut() {
            // SAFETY: a valid, aligned &mut u8; volatile so it is not elided.
            unsafe { std::ptr::write_volatile(byte, 0) };
        }
    }
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Psk(<{} bytes, hidden>)", self.0 .0.len())
    }
}

impl Psk {
    /// Reads a key file: its bytes less trailing whitespace (a newline
    /// added by an editor or `echo` must not change the key).
    pub fn from_file(path: &Path) -> Result<Psk, KeyError> {
        let bytes = std::fs::read(path).map_err(|source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if bytes.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong {
                path: path.to_path_buf(),
            });
        }
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        if end < MIN_KEY_LEN {
            return Err(KeyError::TooShort {
                path: path.to_path_buf(),
                length: end,
            });
        }
        Ok(Psk(Arc::new(KeyBytes(bytes[..end].to_vec()))))
    }

    /// A key from bytes (tests and the fuzz harness).
    pub fn from_bytes(bytes: &[u8]) -> Psk {
        Psk(Arc::new(KeyBytes(bytes.to_vec())))
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0 .0).expect("HMAC takes keys of any length");
        mac.update(label);
        for part in parts {
            mac.update(part);
        }
        mac
    }

    /// The MAC of `label` over the handshake: both nonces, agent's first,
    /// then the transcript.
    fn proof(&self, label: &[u8], handshake: &Handshake) -> Hmac<Sha256> {
        self.mac(
            label,
            &[
                handshake.agent_nonce,
                handshake.client_nonce,
                &handshake.transcript.client_to_agent,
                &handshake.transcript.agent_to_client,
            ],
        )
    }

    /// The client's answer to the agent's challenge.
    pub fn client_mac(&self, handshake: &Handshake) -> [u8; MAC_LEN] {
        self.proof(CLIENT_LABEL, handshake).finalize().into_bytes().into()
    }

    /// The agent's proof that it knows the key too.
    pub fn agent_mac(&self, handshake: &Handshake) -> [u8; MAC_LEN] {
        self.proof(AGENT_LABEL, handshake).finalize().into_bytes().into()
    }

    /// Checks a client's MAC in constant time.
    pub fn verify_client(&self, handshake: &Handshake, mac: &[u8]) -> bool {
        self.proof(CLIENT_LABEL, handshake).verify_slice(mac).is_ok()
    }

    /// Checks the agent's MAC in constant time.
    pub fn verify_agent(&self, handshake: &Handshake, mac: &[u8]) -> bool {
        self.proof(AGENT_LABEL, handshake).verify_slice(mac).is_ok()
    }

    /// True when `mac` is the proof an older client (one that did not seal
    /// the session) makes with this key: the agent refuses it, but can say
    /// why instead of "wrong key".
    pub fn is_handshake_only_proof(&self, agent_nonce: &[u8], client_nonce: &[u8], mac: &[u8]) -> bool {
        self.mac(HANDSHAKE_ONLY_CLIENT_LABEL, &[agent_nonce, client_nonce])
            .verify_slice(mac)
            .is_ok()
    }

    /// The key that MACs every frame of the session after the proof.
    pub fn session_key(&self, handshake: &Handshake) -> SessionKey {
        SessionKey(self.proof(SESSION_LABEL, handshake).finalize().into_bytes().into())
    }
}

/// A fresh random nonce.
pub fn new_nonce() -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut nonce).expect("the OS random number generator is unavailable");
    nonce
}

/// Lower-case hex of `bytes`: the one hex codec of the program (keys,
/// nonces, proofs and session tokens).
pub fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exactly `len` bytes from hex digits (either case), or None.
pub fn hex_decode(hex: &str, len: usize) -> Option<Vec<u8>> {
    // from_str_radix alone would take "+a" as a byte.
    if hex.len() != 2 * len || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..len)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRANSCRIPT: Transcript = Transcript {
        client_to_agent: [1; DIGEST_LEN],
        agent_to_client: [2; DIGEST_LEN],
    };

    #[test]
    fn both_sides_agree_with_the_same_key_only() {
        let key = Psk::from_bytes(b"correct horse battery staple");
        let other = Psk::from_bytes(b"correct horse battery stapler");
        let (a, c) = (new_nonce(), new_nonce());
        let shake = Handshake {
            agent_nonce: &a,
            client_nonce: &c,
            transcript: &TRANSCRIPT,
        };
        let mac = key.client_mac(&shake);
        assert!(key.verify_client(&shake, &mac));
        assert!(!other.verify_client(&shake, &mac));
        let fresh = new_nonce();
        let replayed = Handshake {
            agent_nonce: &fresh,
            ..shake
        };
        assert!(
            !key.verify_client(&replayed, &mac),
            "a replay against a fresh challenge"
        );
        assert!(!key.verify_client(&shake, &mac[..31]));
        let proof = key.agent_mac(&shake);
        assert!(key.verify_agent(&shake, &proof));
        let replayed = Handshake {
            client_nonce: &fresh,
            ..shake
        };
        assert!(!key.verify_agent(&replayed, &proof), "a replayed proof");
        // One side's MAC is not the other's: the labels differ.
        assert!(!key.verify_agent(&shake, &mac));
    }

    #[test]
    fn a_rewritten_hello_breaks_the_proof() {
        let key = Psk::from_bytes(b"correct horse battery staple");
        let (a, c) = (new_nonce(), new_nonce());
        let seen = Handshake {
            agent_nonce: &a,
            client_nonce: &c,
            transcript: &TRANSCRIPT,
        };
        let mac = key.client_mac(&seen);
        for transcript in [
            Transcript {
                client_to_agent: [9; DIGEST_LEN],
                ..TRANSCRIPT
            },
            Transcript {
                agent_to_client: [9; DIGEST_LEN],
                ..TRANSCRIPT
            },
        ] {
            let other = Handshake {
                transcript: &transcript,
                ..seen
            };
            assert!(!key.verify_client(&other, &mac));
            assert_ne!(
                key.session_key(&other).tag(End::Client, 0, b"{}"),
                key.session_key(&seen).tag(End::Client, 0, b"{}")
            );
        }
    }

    #[test]
    fn frame_tags_bind_the_direction_the_number_and_the_body() {
        let key = Psk::from_bytes(b"correct horse battery staple");
        let (a, c) = (new_nonce(), new_nonce());
        let shake = Handshake {
            agent_nonce: &a,
            client_nonce: &c,
            transcript: &TRANSCRIPT,
        };
        let session = key.session_key(&shake);
        let tag = session.tag(End::Client, 3, b"{\"type\":\"start\"}");
        assert!(session.verify(End::Client, 3, b"{\"type\":\"start\"}", &tag));
        assert!(
            !session.verify(End::Agent, 3, b"{\"type\":\"start\"}", &tag),
            "reflected"
        );
        assert!(
            !session.verify(End::Client, 4, b"{\"type\":\"start\"}", &tag),
            "replayed later"
        );
        assert!(!session.verify(End::Client, 3, b"{\"type\":\"stop\"}", &tag), "changed");
        // Another session (fresh nonces) has another key.
        let fresh = new_nonce();
        let other = key.session_key(&Handshake {
            client_nonce: &fresh,
            ..shake
        });
        assert!(!other.verify(End::Client, 3, b"{\"type\":\"start\"}", &tag));
        assert_eq!(format!("{session:?}"), "SessionKey(<hidden>)");
    }

    #[test]
    fn an_older_clients_proof_is_recognised_not_accepted() {
        let key = Psk::from_bytes(b"correct horse battery staple");
        let (a, c) = (new_nonce(), new_nonce());
        let mut old = Hmac::<Sha256>::new_from_slice(b"correct horse battery staple").unwrap();
        old.update(b"nicbench-auth-v1 client\0");
        old.update(&a);
        old.update(&c);
        let old: [u8; MAC_LEN] = old.finalize().into_bytes().into();
        assert!(key.is_handshake_only_proof(&a, &c, &old));
        let shake = Handshake {
            agent_nonce: &a,
            client_nonce: &c,
            transcript: &TRANSCRIPT,
        };
        assert!(!key.verify_client(&shake, &old));
        assert!(!key.is_handshake_only_proof(&a, &c, &key.client_mac(&shake)));
    }

    #[test]
    fn key_files_are_trimmed_and_short_keys_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "0123456789abcdef\n").unwrap();
        let key = Psk::from_file(&path).unwrap();
        let shake = Handshake {
            agent_nonce: b"a",
            client_nonce: b"c",
            transcript: &TRANSCRIPT,
        };
        assert_eq!(
            key.client_mac(&shake),
            Psk::from_bytes(b"0123456789abcdef").client_mac(&shake)
        );
        assert!(!format!("{key:?}").contains("0123"));
        std::fs::write(&path, "short\n").unwrap();
        let err = Psk::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("5 bytes") && err.contains("at least 16"), "{err}");
        let err = Psk::from_file(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(err.contains("cannot read"), "{err}");
    }

    #[test]
    fn hex_round_trips_and_refuses_bad_input() {
        let nonce = new_nonce();
        assert_eq!(hex_decode(&hex_encode(&nonce), NONCE_LEN).unwrap(), nonce);
        assert!(hex_decode("zz", 1).is_none());
        assert!(hex_decode("00", 2).is_none());
        assert!(hex_decode("éé", 1).is_none());
        // A sign is not a hex digit (from_str_radix would take "+a").
        assert!(hex_decode("+a", 1).is_none());
        assert_eq!(hex_decode("0aFF", 2).unwrap(), [0x0a, 0xff]);
    }
}
