//! iperf3's RSA authentication, client side (`iperf3 --username
//! --rsa-public-key-path`): the credentials go to the server as
//! `authtoken` in the parameter JSON, the text
//! `"user: USER\npwd:  PASSWORD\nts:   UNIX_SECONDS"` encrypted with the
//! server's RSA public key and base64-encoded (`iperf_auth.c`,
//! `encode_auth_setting`). The server decrypts it with its private key,
//! checks the time within its skew threshold (10 s by default) and looks
//! up `USER,sha256("{USER}PASSWORD")` in its authorized-users file.
//!
//! Padding: iperf3 3.17 and later use OAEP (OpenSSL's default, SHA-1 and
//! MGF1-SHA-1) unless both ends pass `--use-pkcs1-padding`; before 3.17
//! (Debian 12's 3.12 among them) always PKCS#1 v1.5. The password comes
//! from `IPERF3_PASSWORD`, as iperf3 takes it, never from a prompt.
//!
//! The RSA is RustCrypto's `rsa` crate; nothing here is hand-rolled. Only
//! the public-key operation is used (RUSTSEC-2023-0071, a timing leak of
//! the private key in decryption and signing, does not apply).

use std::path::Path;

use base64::Engine;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::DecodePublicKey;
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, Pkcs1v15Encrypt, RsaPublicKey};

/// The variable iperf3 reads the password from.
pub const PASSWORD_ENV: &str = "IPERF3_PASSWORD";

/// How the credentials are padded before encryption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// OAEP with SHA-1: iperf3 3.17 and later, by default.
    Oaep,
    /// PKCS#1 v1.5: iperf3 before 3.17, or `--use-pkcs1-padding`.
    Pkcs1v15,
}

impl Padding {
    pub fn name(self) -> &'static str {
        match self {
            Padding::Oaep => "OAEP",
            Padding::Pkcs1v15 => "PKCS#1 v1.5",
        }
    }
}

/// What is wrong with the credentials, each with what to do.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no password: set {PASSWORD_ENV} to the password of iperf3 user '{0}' (nicbench never prompts)")]
    NoPassword(String),
    #[error("reading the RSA public key {path}: {source}")]
    KeyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} holds no RSA public key in PEM ('-----BEGIN PUBLIC KEY-----' or '-----BEGIN RSA PUBLIC KEY-----'); \
         make one from the server's private key with 'openssl rsa -in private.pem -pubout -out public.pem'"
    )]
    NotAKey { path: String },
    #[error(
        "the {what} contains {problem}: iperf3 servers read the credentials up to the first white space \
         and the user name up to the first comma; choose one without"
    )]
    BadText { what: &'static str, problem: &'static str },
    #[error(
        "user name and password are too long for a {bits}-bit key with {padding} padding ({length} bytes of \
         credentials text, at most {max}); use shorter ones or a larger key"
    )]
    TooLong {
        bits: usize,
        padding: &'static str,
        length: usize,
        max: usize,
    },
    #[error("encrypting the credentials: {0}")]
    Encrypt(String),
}

/// A user name, its password and the server's public key.
#[derive(Clone)]
pub struct Credentials {
    username: String,
    password: String,
    key: RsaPublicKey,
    padding: Padding,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"(hidden)")
            .field("key_bits", &(self.key.size() * 8))
            .field("padding", &self.padding)
            .finish()
    }
}

impl Credentials {
    /// Credentials for `username`, the password from `password` (the
    /// value of [`PASSWORD_ENV`]), the key from the PEM file at `key_path`.
    pub fn load(
        username: &str,
        password: Option<String>,
        key_path: &Path,
        padding: Padding,
    ) -> Result<Credentials, AuthError> {
        let password = password.ok_or_else(|| AuthError::NoPassword(username.to_string()))?;
        let path = key_path.display().to_string();
        let pem = std::fs::read_to_string(key_path).map_err(|source| AuthError::KeyFile {
            path: path.clone(),
            source,
        })?;
        let key = parse_public_key(&pem).ok_or(AuthError::NotAKey { path })?;
        Credentials::new(username, &password, key, padding)
    }

    /// Checks that the server can read the credentials back and that
    /// they fit the key.
    pub fn new(username: &str, password: &str, key: RsaPublicKey, padding: Padding) -> Result<Credentials, AuthError> {
        let check = |what: &'static str, text: &str, comma: bool| {
            if text.is_empty() {
                Err(AuthError::BadText {
                    what,
                    problem: "nothing",
                })
            } else if text.chars().any(char::is_whitespace) {
                Err(AuthError::BadText {
                    what,
                    problem: "white space",
                })
            } else if comma && text.contains(',') {
                Err(AuthError::BadText {
                    what,
                    problem: "a comma",
                })
            } else {
                Ok(())
            }
        };
        check("user name", username, true)?;
        check("password", password, false)?;
        let credentials = Credentials {
            username: username.to_string(),
            password: password.to_string(),
            key,
            padding,
        };
        // The longest timestamp a token will carry.
        let length = credentials.plaintext(i64::MAX).len();
        let max = credentials.max_plaintext();
        if length > max {
            return Err(AuthError::TooLong {
                bits: credentials.key.size() * 8,
                padding: padding.name(),
                length,
                max,
            });
        }
        Ok(credentials)
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    pub fn padding(&self) -> Padding {
        self.padding
    }

    /// iperf3's `auth_text_format`.
    fn plaintext(&self, unix_seconds: i64) -> String {
        format!("user: {}\npwd:  {}\nts:   {unix_seconds}", self.username, self.password)
    }

    /// The longest text the key takes with this padding (RFC 8017: k - 42
    /// for OAEP with SHA-1, k - 11 for PKCS#1 v1.5).
    fn max_plaintext(&self) -> usize {
        let k = self.key.size();
        match self.padding {
            Padding::Oaep => k.saturating_sub(42),
            Padding::Pkcs1v15 => k.saturating_sub(11),
        }
    }

    /// The `authtoken` for a test starting at `unix_seconds`.
    pub fn token(&self, unix_seconds: i64) -> Result<String, AuthError> {
        let text = self.plaintext(unix_seconds);
        let mut rng = rsa::rand_core::OsRng;
        let encrypted = match self.padding {
            Padding::Oaep => self.key.encrypt(&mut rng, Oaep::new::<sha1::Sha1>(), text.as_bytes()),
            Padding::Pkcs1v15 => self.key.encrypt(&mut rng, Pkcs1v15Encrypt, text.as_bytes()),
        }
        .map_err(|e| AuthError::Encrypt(e.to_string()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(encrypted))
    }

    /// The token for now.
    pub fn token_now(&self) -> Result<String, AuthError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.token(now)
    }
}

/// A public key in PEM: SubjectPublicKeyInfo (`BEGIN PUBLIC KEY`, what
/// `openssl rsa -pubout` writes and iperf3 reads) or PKCS#1 (`BEGIN RSA
/// PUBLIC KEY`).
pub fn parse_public_key(pem: &str) -> Option<RsaPublicKey> {
    let pem = pem.trim();
    RsaPublicKey::from_public_key_pem(pem)
        .ok()
        .or_else(|| RsaPublicKey::from_pkcs1_pem(pem).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::RsaPrivateKey;

    fn keypair() -> (RsaPrivateKey, RsaPublicKey) {
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
        let public = RsaPublicKey::from(&private);
        (private, public)
    }

    #[test]
    fn the_token_decrypts_to_iperf3s_text_with_either_padding() {
        let (private, public) = keypair();
        for padding in [Padding::Oaep, Padding::Pkcs1v15] {
            let c = Credentials::new("mario", "rossi", public.clone(), padding).unwrap();
            let token = c.token(1_700_000_000).unwrap();
            let encrypted = base64::engine::general_purpose::STANDARD.decode(&token).unwrap();
            assert_eq!(encrypted.len(), 128, "one block of a 1024-bit key");
            let plain = match padding {
                Padding::Oaep => private.decrypt(Oaep::new::<sha1::Sha1>(), &encrypted),
                Padding::Pkcs1v15 => private.decrypt(Pkcs1v15Encrypt, &encrypted),
            }
            .unwrap();
            assert_eq!(
                String::from_utf8(plain).unwrap(),
                "user: mario\npwd:  rossi\nts:   1700000000"
            );
            // Random padding: the same text never encrypts the same way twice.
            assert_ne!(c.token(1_700_000_000).unwrap(), token);
        }
    }

    #[test]
    fn credentials_the_server_cannot_read_back_are_refused() {
        let (_, public) = keypair();
        let new = |u: &str, p: &str| Credentials::new(u, p, public.clone(), Padding::Oaep);
        assert!(new("a b", "x").unwrap_err().to_string().contains("white space"));
        assert!(new("a,b", "x").unwrap_err().to_string().contains("comma"));
        assert!(new("a", "x y").unwrap_err().to_string().contains("white space"));
        assert!(new("", "x").is_err());
        assert!(new("a", "p,w").is_ok(), "a comma in the password is fine");
        // 1024-bit OAEP takes 86 bytes; labels, a 1-byte name and the longest timestamp take 39.
        let err = new("u", &"p".repeat(60)).unwrap_err();
        assert!(matches!(err, AuthError::TooLong { max: 86, .. }), "{err}");
        assert!(Credentials::new("u", &"p".repeat(60), public, Padding::Pkcs1v15).is_ok());
    }

    #[test]
    fn keys_load_from_both_pem_forms_and_errors_say_what_to_do() {
        use rsa::pkcs1::EncodeRsaPublicKey;
        use rsa::pkcs8::EncodePublicKey;
        let (_, public) = keypair();
        let spki = public.to_public_key_pem(rsa::pkcs8::LineEnding::LF).unwrap();
        let pkcs1 = public.to_pkcs1_pem(rsa::pkcs1::LineEnding::LF).unwrap();
        assert_eq!(parse_public_key(&spki), Some(public.clone()));
        assert_eq!(parse_public_key(&pkcs1), Some(public));
        assert_eq!(
            parse_public_key("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"),
            None
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        std::fs::write(&path, "not a key").unwrap();
        let err = Credentials::load("u", Some("p".into()), &path, Padding::Oaep).unwrap_err();
        assert!(err.to_string().contains("openssl rsa"), "{err}");
        let err = Credentials::load("u", None, &path, Padding::Oaep).unwrap_err();
        assert!(err.to_string().contains(PASSWORD_ENV), "{err}");
        let err = Credentials::load("u", Some("p".into()), &dir.path().join("absent"), Padding::Oaep).unwrap_err();
        assert!(matches!(err, AuthError::KeyFile { .. }), "{err}");
        std::fs::write(&path, spki).unwrap();
        let c = Credentials::load("u", Some("p".into()), &path, Padding::Oaep).unwrap();
        assert!(
            !format!("{c:?}").contains("\"p\""),
            "the password stays out of Debug: {c:?}"
        );
    }
}
