//! Pre-shared-key authentication of the control connection, without I/O.
//!
//! Right after the hellos, an agent started with `--psk-file` sends
//! `auth_challenge {nonce}` (32 random bytes). The client answers
//! `auth_response {nonce, mac}` with its own fresh nonce and
//! `HMAC-SHA256(key, "nicbench-auth-v1 client" 0 agent_nonce client_nonce)`.
//! The agent checks the MAC in constant time and proves that it knows the
//! key too with `auth_ok {mac}` over `"nicbench-auth-v1 agent" 0
//! client_nonce agent_nonce`. Each side's nonce is fresh per connection, so
//! a recorded answer is worthless to an eavesdropper in either direction,
//! and the labels keep one side's MAC from being reflected as the other's.
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

const CLIENT_LABEL: &[u8] = b"nicbench-auth-v1 client\0";
const AGENT_LABEL: &[u8] = b"nicbench-auth-v1 agent\0";

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
         (e.g. 'head -c 32 /dev/urandom | base64 > {path}')"
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

    fn mac(&self, label: &[u8], first: &[u8], second: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0 .0).expect("HMAC takes keys of any length");
        mac.update(label);
        mac.update(first);
        mac.update(second);
        mac
    }

    /// The client's answer to the agent's challenge.
    pub fn client_mac(&self, agent_nonce: &[u8], client_nonce: &[u8]) -> [u8; MAC_LEN] {
        self.mac(CLIENT_LABEL, agent_nonce, client_nonce)
            .finalize()
            .into_bytes()
            .into()
    }

    /// The agent's proof that it knows the key too.
    pub fn agent_mac(&self, client_nonce: &[u8], agent_nonce: &[u8]) -> [u8; MAC_LEN] {
        self.mac(AGENT_LABEL, client_nonce, agent_nonce)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Checks a client's MAC in constant time.
    pub fn verify_client(&self, agent_nonce: &[u8], client_nonce: &[u8], mac: &[u8]) -> bool {
        self.mac(CLIENT_LABEL, agent_nonce, client_nonce)
            .verify_slice(mac)
            .is_ok()
    }

    /// Checks the agent's MAC in constant time.
    pub fn verify_agent(&self, client_nonce: &[u8], agent_nonce: &[u8], mac: &[u8]) -> bool {
        self.mac(AGENT_LABEL, client_nonce, agent_nonce)
            .verify_slice(mac)
            .is_ok()
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

    #[test]
    fn both_sides_agree_with_the_same_key_only() {
        let key = Psk::from_bytes(b"correct horse battery staple");
        let other = Psk::from_bytes(b"correct horse battery stapler");
        let (a, c) = (new_nonce(), new_nonce());
        let mac = key.client_mac(&a, &c);
        assert!(key.verify_client(&a, &c, &mac));
        assert!(!other.verify_client(&a, &c, &mac));
        assert!(
            !key.verify_client(&new_nonce(), &c, &mac),
            "a replay against a fresh challenge"
        );
        assert!(!key.verify_client(&a, &c, &mac[..31]));
        let proof = key.agent_mac(&c, &a);
        assert!(key.verify_agent(&c, &a, &proof));
        assert!(!key.verify_agent(&new_nonce(), &a, &proof), "a replayed proof");
        // One side's MAC is not the other's: the labels differ.
        assert!(!key.verify_agent(&a, &c, &mac));
    }

    #[test]
    fn key_files_are_trimmed_and_short_keys_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "0123456789abcdef\n").unwrap();
        let key = Psk::from_file(&path).unwrap();
        assert_eq!(
            key.client_mac(b"a", b"c"),
            Psk::from_bytes(b"0123456789abcdef").client_mac(b"a", b"c")
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
