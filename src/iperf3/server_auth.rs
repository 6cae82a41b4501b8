//! iperf3's RSA authentication, server side: what `iperf3 -s
//! --rsa-private-key-path KEY --authorized-users-path USERS` checks, for
//! `nicbench serve --iperf3-port` with `--iperf3-rsa-private-key KEY` and
//! `--iperf3-authorized-users USERS` (the same files).
//!
//! A client sends `authtoken` in its parameter JSON: the text
//! `"user: USER\npwd:  PASSWORD\nts:   UNIX_SECONDS"` encrypted with our
//! public key, base64-encoded ([`super::auth`] builds it; `iperf_auth.c`,
//! `encode_auth_setting`). As iperf3's `test_is_authorized`,
//! `decode_auth_setting` and `check_authentication` do, the token is
//! decoded and decrypted with the private key, the timestamp must be
//! within [`SKEW_SECONDS`] of our clock, and the users file must hold a
//! line `USER,HEX` where HEX is the SHA-256 of `{USER}PASSWORD` (the braces
//! are literal). Any failure is one answer to the client: SERVER_ERROR
//! with IEAUTHTEST, "test authorization failed"; the reason ([`Denied`])
//! is for the agent's log only.
//!
//! Replays: iperf3 accepts the same token again for as long as its
//! timestamp is within the skew, so anybody who recorded one could run
//! tests in the user's name for that long. This agent remembers each token
//! it accepted (a SHA-256 of its encrypted bytes) until its timestamp has
//! left the window, and refuses a repeat ([`Denied::Replayed`]). A client's
//! every token differs (both paddings are randomized), so honest clients
//! never meet this.
//!
//! Padding: iperf3 before 3.17 (Debian 12's 3.12) encrypts with PKCS#1
//! v1.5 only; 3.17 and later with OAEP (SHA-1, MGF1-SHA-1) unless both
//! ends pass `--use-pkcs1-padding`. A server cannot tell from the token,
//! so it goes by the `client_version` in the parameters
//! ([`padding_for`]): PKCS#1 v1.5 for a version before 3.17, OAEP for
//! any other (3.17 and later, nicbench's client, no version). One padding
//! is tried per token, never both.
//!
//! The RSA is RustCrypto's `rsa` crate, decrypting with blinding
//! (`decrypt_blinded`). Caveat, RUSTSEC-2023-0071 ("Marvin"): that
//! crate's private-key operation is not constant-time, and blinding does
//! not make it so; no fixed release exists. Somebody who can reach the
//! iperf3 port and time very many decryptions precisely may, in
//! principle, learn the private key, and with it read tokens recorded
//! earlier (user names, passwords). PKCS#1 v1.5, which any client can
//! choose by announcing an old version, is the padding those attacks work
//! best on. Each attempt costs a connection counted by
//! `--max-connections-per-minute`. Use a key made for this port only,
//! passwords used nowhere else, and keep the port to trusted networks.
//! The agent's own control port does not have this exposure: its key
//! proof is HMAC-SHA256 (`protocol::auth`).

use std::path::Path;

use base64::Engine;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::DecodePrivateKey;
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, Pkcs1v15Encrypt, RsaPrivateKey};
use sha2::Digest;
use subtle::ConstantTimeEq;

use super::auth::Padding;

/// How far a token's timestamp may be from our clock, either way
/// (iperf3's default `--time-skew-threshold`).
pub const SKEW_SECONDS: i64 = 10;
/// The longest user name or password taken from a token or the users file.
const MAX_TEXT: usize = 256;

/// Why the agent cannot use the key or the users file: it refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is an encrypted private key; iperf3 and nicbench read it only unencrypted: \
         'openssl rsa -in {path} -out plain.pem' (then chmod 600 plain.pem)"
    )]
    EncryptedKey { path: String },
    #[error(
        "{path} holds no RSA private key in PEM ('-----BEGIN PRIVATE KEY-----' or \
         '-----BEGIN RSA PRIVATE KEY-----'); make one with 'openssl genrsa -out private.pem 2048' \
         and give clients 'openssl rsa -in private.pem -pubout -out public.pem'"
    )]
    NotAKey { path: String },
    #[error(
        "{path} line {line}: {why}; each line is USER,SHA256 with SHA256 the 64 hex digits of \
         sha256(\"{{USER}}PASSWORD\"), e.g. from: echo -n '{{mario}}rossi' | sha256sum \
         (lines starting with # are comments)"
    )]
    BadLine { path: String, line: usize, why: String },
    #[error("{path} names no user: add a line USER,SHA256 (see --iperf3-authorized-users)")]
    NoUsers { path: String },
}

/// Why a client's credentials were refused. Logged with the peer; the
/// client only hears "test authorization failed".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("no credentials (no authtoken in its parameters; iperf3 -c needs --username and --rsa-public-key-path)")]
    NoToken,
    #[error("the authtoken is not base64")]
    NotBase64,
    #[error("the authtoken is {got} bytes, not one {want}-byte block of this agent's key")]
    WrongLength { got: usize, want: usize },
    #[error(
        "the authtoken does not decrypt with this agent's key and {padding} padding (client version {version}): \
         another key, or the other padding"
    )]
    Undecryptable { padding: &'static str, version: String },
    #[error("the decrypted authtoken is not iperf3's 'user: ... pwd: ... ts: ...' text")]
    Malformed,
    #[error("user '{user}': its timestamp is {skew} s from this host's clock (at most {SKEW_SECONDS} s)")]
    Stale { user: String, skew: i64 },
    #[error("user '{0}': this token was used already (a replayed token; every test needs a fresh one)")]
    Replayed(String),
    #[error("{0} tokens accepted within the last {SKEW_SECONDS} s: refusing more until they expire")]
    TooManyRecent(usize),
    #[error("unknown user '{0}'")]
    UnknownUser(String),
    #[error("user '{0}': wrong password")]
    WrongPassword(String),
}

/// One line of the authorized-users file.
struct User {
    name: String,
    sha256: [u8; 32],
}

/// The private key and the authorized users, loaded and checked at start-up.
pub struct ServerAuth {
    key: RsaPrivateKey,
    users: Vec<User>,
    /// Tokens accepted while their timestamp may still pass: digest of the
    /// encrypted bytes, and the Unix second after which it cannot.
    accepted: std::sync::Mutex<Vec<([u8; 32], i64)>>,
}

/// Most accepted tokens remembered at once; past it, new ones are refused
/// until old ones expire (the per-minute connection limit keeps an honest
/// agent far below it).
const MAX_REMEMBERED_TOKENS: usize = 100_000;

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("key_bits", &(self.key.size() * 8))
            .field("users", &self.users.len())
            .finish()
    }
}

impl ServerAuth {
    /// Loads iperf3's two files: the private key in PEM, the users file.
    pub fn load(key_path: &Path, users_path: &Path) -> Result<ServerAuth, LoadError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| LoadError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let key = parse_private_key(&read(key_path)?, &key_path.display().to_string())?;
        let users = parse_users(&read(users_path)?, &users_path.display().to_string())?;
        Ok(ServerAuth {
            key,
            users,
            accepted: Default::default(),
        })
    }

    /// From a key and the users file's text (`path` names it in errors).
    pub fn new(key: RsaPrivateKey, users_text: &str, path: &str) -> Result<ServerAuth, LoadError> {
        Ok(ServerAuth {
            key,
            users: parse_users(users_text, path)?,
            accepted: Default::default(),
        })
    }

    /// How many users the file names.
    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// Checks a client's `authtoken` at `now_unix_seconds`; its user name
    /// when the credentials are right.
    pub fn check(
        &self,
        authtoken: Option<&str>,
        client_version: Option<&str>,
        now_unix_seconds: i64,
    ) -> Result<String, Denied> {
        let token = authtoken.ok_or(Denied::NoToken)?;
        let encrypted = base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .map_err(|_| Denied::NotBase64)?;
        let want = self.key.size();
        if encrypted.len() != want {
            return Err(Denied::WrongLength {
                got: encrypted.len(),
                want,
            });
        }
        let padding = padding_for(client_version);
        let mut rng = rsa::rand_core::OsRng;
        let plain = match padding {
            Padding::Oaep => self
                .key
                .decrypt_blinded(&mut rng, Oaep::new::<sha1::Sha1>(), &encrypted),
            Padding::Pkcs1v15 => self.key.decrypt_blinded(&mut rng, Pkcs1v15Encrypt, &encrypted),
        }
        .map_err(|_| Denied::Undecryptable {
            padding: padding.name(),
            version: client_version.map_or("not given".into(), |v| v.escape_debug().to_string()),
        })?;
        let (user, password, ts) = parse_credentials(&plain).ok_or(Denied::Malformed)?;
        let shown = user.escape_debug().to_string();
        let skew = now_unix_seconds.saturating_sub(ts);
        if skew.unsigned_abs() > SKEW_SECONDS as u64 {
            return Err(Denied::Stale { user: shown, skew });
        }
        let digest = sha2::Sha256::digest(format!("{{{user}}}{password}").as_bytes());
        let mut named = false;
        for u in self.users.iter().filter(|u| u.name == user) {
            named = true;
            if bool::from(u.sha256[..].ct_eq(digest.as_slice())) {
                self.remember(&encrypted, ts, now_unix_seconds, &shown)?;
                return Ok(user.to_string());
            }
        }
        Err(if named {
            Denied::WrongPassword(shown)
        } else {
            Denied::UnknownUser(shown)
        })
    }
}

impl ServerAuth {
    /// Records an accepted token until its timestamp `ts` leaves the skew
    /// window; a token already recorded is a replay.
    fn remember(&self, encrypted: &[u8], ts: i64, now: i64, user: &str) -> Result<(), Denied> {
        let digest: [u8; 32] = sha2::Sha256::digest(encrypted).into();
        let mut accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        accepted.retain(|(_, until)| *until >= now);
        if accepted.iter().any(|(seen, _)| *seen == digest) {
            return Err(Denied::Replayed(user.to_string()));
        }
        if accepted.len() >= MAX_REMEMBERED_TOKENS {
            return Err(Denied::TooManyRecent(accepted.len()));
        }
        accepted.push((digest, ts.saturating_add(SKEW_SECONDS)));
        Ok(())
    }
}

/// The padding a client of `client_version` encrypted with: PKCS#1 v1.5
/// for iperf3 before 3.17, OAEP otherwise (see the module doc).
pub fn padding_for(client_version: Option<&str>) -> Padding {
    let Some(version) = client_version else {
        return Padding::Oaep;
    };
    let mut parts = version.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) if (major, minor) < (3, 17) => Padding::Pkcs1v15,
        _ => Padding::Oaep,
    }
}

/// The decrypted text as iperf3's `sscanf("user: %s\npwd:  %s\nts:   %ld")`
/// reads it: user name, password, timestamp. None for anything else.
pub fn parse_credentials(plain: &[u8]) -> Option<(&str, &str, i64)> {
    let text = std::str::from_utf8(plain).ok()?;
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let &["user:", user, "pwd:", password, "ts:", ts] = words.as_slice() else {
        return None;
    };
    if user.len() > MAX_TEXT || password.len() > MAX_TEXT || user.contains(',') {
        return None;
    }
    let digits = ts.strip_prefix('-').unwrap_or(ts);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((user, password, ts.parse().ok()?))
}

/// A private key in PEM: PKCS#8 (`BEGIN PRIVATE KEY`, what OpenSSL 3's
/// `genrsa` writes) or PKCS#1 (`BEGIN RSA PRIVATE KEY`).
pub fn parse_private_key(pem: &str, path: &str) -> Result<RsaPrivateKey, LoadError> {
    let pem = pem.trim();
    if pem.contains("ENCRYPTED") {
        return Err(LoadError::EncryptedKey { path: path.into() });
    }
    RsaPrivateKey::from_pkcs8_pem(pem)
        .ok()
        .or_else(|| RsaPrivateKey::from_pkcs1_pem(pem).ok())
        .ok_or_else(|| LoadError::NotAKey { path: path.into() })
}

/// iperf3's authorized-users file: `USER,SHA256HEX` per line; empty lines
/// and lines starting with `#` are skipped. Stricter than iperf3, which
/// skips a line it cannot read: here such a line stops the start-up, so a
/// typo never locks a user out unseen.
fn parse_users(text: &str, path: &str) -> Result<Vec<User>, LoadError> {
    let mut users = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r').trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| LoadError::BadLine {
            path: path.into(),
            line: index + 1,
            why,
        };
        let fields: Vec<&str> = line.split(',').collect();
        let [name, hash] = fields.as_slice() else {
            return Err(bad(format!("{} comma-separated fields, expected 2", fields.len())));
        };
        if name.is_empty() || name.len() > MAX_TEXT || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(
                "the user name is empty, too long or holds white space or control characters".into(),
            ));
        }
        let sha256 =
            decode_hex32(hash).ok_or_else(|| bad(format!("'{}' is not 64 hex digits", hash.escape_debug())))?;
        users.push(User {
            name: (*name).to_string(),
            sha256,
        });
    }
    if users.is_empty() {
        return Err(LoadError::NoUsers { path: path.into() });
    }
    Ok(users)
}

fn decode_hex32(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::auth::Credentials;
    use super::*;
    use rsa::RsaPublicKey;

    const NOW: i64 = 1_700_000_000;

    fn sha_hex(text: &str) -> String {
        sha2::Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn server() -> (ServerAuth, RsaPublicKey) {
        let key = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
        let public = RsaPublicKey::from(&key);
        let users = format!(
            "# username,sha256\nmario,{}\r\n\nluigi,{}\n",
            sha_hex("{mario}rossi"),
            sha_hex("{luigi}verdi").to_uppercase()
        );
        (ServerAuth::new(key, &users, "users.csv").unwrap(), public)
    }

    fn token(public: &RsaPublicKey, user: &str, password: &str, padding: Padding, ts: i64) -> String {
        Credentials::new(user, password, public.clone(), padding)
            .unwrap()
            .token(ts)
            .unwrap()
    }

    #[test]
    fn our_clients_tokens_pass_with_the_padding_its_version_implies() {
        let (server, public) = server();
        let oaep = |ts| token(&public, "mario", "rossi", Padding::Oaep, ts);
        assert_eq!(server.check(Some(&oaep(NOW)), Some("3.17.1"), NOW), Ok("mario".into()));
        assert_eq!(
            server.check(Some(&oaep(NOW)), Some("nicbench 1.0"), NOW + 10),
            Ok("mario".into())
        );
        assert_eq!(server.check(Some(&oaep(NOW)), None, NOW - 10), Ok("mario".into()));
        let oaep = oaep(NOW);
        let pkcs1 = token(&public, "luigi", "verdi", Padding::Pkcs1v15, NOW);
        assert_eq!(server.check(Some(&pkcs1), Some("3.12"), NOW), Ok("luigi".into()));
        // One padding per token: the version decides, never a second try.
        assert!(matches!(
            server.check(Some(&pkcs1), Some("3.17"), NOW),
            Err(Denied::Undecryptable { padding: "OAEP", .. })
        ));
        assert!(matches!(
            server.check(Some(&oaep), Some("3.12"), NOW),
            Err(Denied::Undecryptable { .. })
        ));
    }

    #[test]
    fn an_accepted_token_is_refused_when_it_comes_again_within_the_skew() {
        let (server, public) = server();
        let once = token(&public, "mario", "rossi", Padding::Oaep, NOW);
        assert_eq!(server.check(Some(&once), Some("3.17"), NOW), Ok("mario".into()));
        for later in [NOW, NOW + 5, NOW + 10] {
            assert_eq!(
                server.check(Some(&once), Some("3.17"), later),
                Err(Denied::Replayed("mario".into())),
                "at {later}"
            );
        }
        assert!(matches!(
            server.check(Some(&once), Some("3.17"), NOW + 11),
            Err(Denied::Stale { .. })
        ));
        // The same user and second, freshly encrypted: a new token.
        let again = token(&public, "mario", "rossi", Padding::Oaep, NOW);
        assert_eq!(server.check(Some(&again), Some("3.17"), NOW + 1), Ok("mario".into()));
        // Remembered only while they could pass: two old ones are forgotten.
        assert_eq!(server.accepted.lock().unwrap().len(), 2);
        let fresh = token(&public, "mario", "rossi", Padding::Oaep, NOW + 100);
        assert_eq!(server.check(Some(&fresh), Some("3.17"), NOW + 100), Ok("mario".into()));
        assert_eq!(server.accepted.lock().unwrap().len(), 1);
    }

    #[test]
    fn wrong_credentials_are_denied_each_for_its_reason() {
        let (agent, public) = server();
        let check = |t: &str, now: i64| agent.check(Some(t), Some("3.17"), now);
        let wrong = token(&public, "mario", "verdi", Padding::Oaep, NOW);
        assert_eq!(check(&wrong, NOW), Err(Denied::WrongPassword("mario".into())));
        let unknown = token(&public, "peach", "rossi", Padding::Oaep, NOW);
        assert_eq!(check(&unknown, NOW), Err(Denied::UnknownUser("peach".into())));
        let right = token(&public, "mario", "rossi", Padding::Oaep, NOW);
        assert_eq!(
            check(&right, NOW + 11),
            Err(Denied::Stale {
                user: "mario".into(),
                skew: 11
            })
        );
        assert!(matches!(check(&right, NOW - 11), Err(Denied::Stale { skew: -11, .. })));
        assert_eq!(agent.check(None, Some("3.12"), NOW), Err(Denied::NoToken));
        assert_eq!(check("not base64!", NOW), Err(Denied::NotBase64));
        assert_eq!(check("AAAA", NOW), Err(Denied::WrongLength { got: 3, want: 128 }));
        // Another key's token is one block of the right length that does not decrypt.
        let (_, other) = server();
        let foreign = token(&other, "mario", "rossi", Padding::Oaep, NOW);
        assert!(matches!(check(&foreign, NOW), Err(Denied::Undecryptable { .. })));
    }

    #[test]
    fn the_decrypted_text_is_read_as_iperf3_reads_it() {
        assert_eq!(
            parse_credentials(b"user: mario\npwd:  rossi\nts:   1700000000"),
            Some(("mario", "rossi", 1_700_000_000))
        );
        assert_eq!(parse_credentials(b"user: a\npwd:  b\nts:   -5"), Some(("a", "b", -5)));
        for bad in [
            &b"user: mario\npwd:  rossi"[..],
            b"user: mario\npwd:  rossi\nts:   12x",
            b"user: mario\npwd:  rossi\nts:   99999999999999999999",
            b"user: mario\npwd:  ros si\nts:   1",
            b"user: ma,rio\npwd:  rossi\nts:   1",
            b"pwd:  rossi\nuser: mario\nts:   1",
            b"user: \xff\npwd:  rossi\nts:   1",
            b"",
        ] {
            assert_eq!(parse_credentials(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn versions_before_3_17_mean_pkcs1_padding() {
        for (version, padding) in [
            (Some("3.12"), Padding::Pkcs1v15),
            (Some("3.16.9"), Padding::Pkcs1v15),
            (Some("3.9+"), Padding::Pkcs1v15),
            (Some("2.0"), Padding::Pkcs1v15),
            (Some("3.17"), Padding::Oaep),
            (Some("3.18-dev"), Padding::Oaep),
            (Some("4.0"), Padding::Oaep),
            (Some("nicbench 1.0"), Padding::Oaep),
            (Some(""), Padding::Oaep),
            (None, Padding::Oaep),
        ] {
            assert_eq!(padding_for(version), padding, "{version:?}");
        }
    }

    #[test]
    fn the_files_are_checked_at_start_up_with_what_to_do() {
        let k = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
        let key = || k.clone();
        let hash = sha_hex("{a}b");
        for (text, wanted) in [
            (format!("a,{hash},extra\n"), "line 1: 3 comma-separated fields"),
            ("# only a comment\n\n".to_string(), "names no user"),
            (format!("\n a b,{hash}\n"), "line 2: the user name"),
            ("a,12ab\n".to_string(), "line 1: '12ab' is not 64 hex digits"),
            ("a\n".to_string(), "1 comma-separated fields"),
        ] {
            let err = ServerAuth::new(key(), &text, "users.csv").unwrap_err().to_string();
            assert!(err.contains(wanted), "{text:?}: {err}");
            assert!(err.contains("users.csv"), "{err}");
        }

        use rsa::pkcs1::EncodeRsaPrivateKey;
        use rsa::pkcs8::EncodePrivateKey;
        let pkcs8 = k.to_pkcs8_pem(rsa::pkcs8::LineEnding::LF).unwrap();
        let pkcs1 = k.to_pkcs1_pem(rsa::pkcs1::LineEnding::LF).unwrap();
        assert_eq!(parse_private_key(&pkcs8, "k").unwrap(), k);
        assert_eq!(parse_private_key(&pkcs1, "k").unwrap(), k);
        let err = parse_private_key("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAA\n", "k.pem").unwrap_err();
        assert!(err.to_string().contains("openssl rsa -in k.pem"), "{err}");
        let err = parse_private_key("-----BEGIN PUBLIC KEY-----\nAA\n", "k.pem").unwrap_err();
        assert!(err.to_string().contains("openssl genrsa"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let (key_path, users_path) = (dir.path().join("k.pem"), dir.path().join("u.csv"));
        std::fs::write(&key_path, pkcs8.as_bytes()).unwrap();
        std::fs::write(&users_path, format!("a,{hash}\n")).unwrap();
        let loaded = ServerAuth::load(&key_path, &users_path).unwrap();
        assert_eq!(loaded.user_count(), 1);
        assert!(!format!("{loaded:?}").contains("BEGIN"), "{loaded:?}");
        let err = ServerAuth::load(&dir.path().join("absent"), &users_path).unwrap_err();
        assert!(matches!(err, LoadError::Read { .. }), "{err}");
    }
}
