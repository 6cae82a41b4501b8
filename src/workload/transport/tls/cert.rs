//! The certificate an agent presents, and how a client trusts it.
//!
//! An agent presents one certificate for its life: the one `serve
//! --tls-cert/--tls-key` named, or one it makes itself (ECDSA P-256,
//! self-signed, for the name `nicbench-agent` and its addresses) when
//! it starts or at its first TLS test. Its SHA-256 goes to the client in the
//! agent's facts.
//!
//! A client never trusts nothing. It checks the certificate against, in
//! this order: the fingerprint `--tls-pin` gave; the CAs of `--tls-ca`
//! (the certificate must name the agent's address); else the fingerprint
//! the agent announced on the control connection, and the result says so
//! (`trust: announced`). In each case the handshake's signature is checked
//! with the certificate's key, so the agent proves it holds that key.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// The certificate this agent presents and its key.
pub struct Serving {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// SHA-256 of the end-entity certificate, 64 hex digits.
    pub sha256: String,
    /// `self-signed`, or the certificate file's path.
    pub source: String,
}

static SERVING: OnceLock<Arc<Serving>> = OnceLock::new();

/// SHA-256 of a certificate, 64 lower-case hex digits.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.as_ref());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A fingerprint as people read it: `ab:cd:...`.
pub fn with_colons(hex: &str) -> String {
    hex.as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(":")
}

/// The certificate this process presents, made self-signed on first use
/// unless [`serve_given`] installed one.
pub fn serving() -> Result<Arc<Serving>, String> {
    if let Some(s) = SERVING.get() {
        return Ok(s.clone());
    }
    let made = Arc::new(self_signed()?);
    // Another thread may have won: present whichever was installed first.
    let _ = SERVING.set(made);
    Ok(SERVING.get().expect("set just above").clone())
}

/// The certificate this process presents, if it has one yet (an agent's
/// facts name it; a client has none).
pub fn serving_now() -> Option<Arc<Serving>> {
    SERVING.get().cloned()
}

/// Makes an ECDSA P-256 certificate signed by its own key.
fn self_signed() -> Result<Serving, String> {
    // The host's name too, where it is one a certificate can hold (a DNS
    // name: letters, digits, '-' and '.'); a name with anything else in it
    // (a hostile or odd hostname) is left out, never the certificate.
    let mut names = vec!["nicbench-agent".to_string()];
    let host = crate::probe::host::hostname();
    let dns_name = !host.is_empty()
        && host.len() <= 253
        && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        && ServerName::try_from(host.as_str()).is_ok();
    if dns_name && host != names[0] {
        names.push(host);
    }
    let made =
        rcgen::generate_simple_self_signed(names).map_err(|e| format!("making a self-signed certificate: {e}"))?;
    let der = made.cert.der().clone();
    Ok(Serving {
        sha256: fingerprint(&der),
        chain: vec![der],
        key: PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into()),
        source: "self-signed".into(),
    })
}

/// Installs the certificate chain in `cert_file` and the key in
/// `key_file` (PEM) as the one this agent presents, checked now: the
/// error names the file and what is wrong with it.
pub fn serve_given(cert_file: &std::path::Path, key_file: &std::path::Path) -> Result<Arc<Serving>, String> {
    use rustls::pki_types::pem::PemObject;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .map_err(|e| format!("--tls-cert {}: {e}", cert_file.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: not PEM certificates: {e}", cert_file.display()))?;
    let first = chain
        .first()
        .ok_or_else(|| format!("--tls-cert {}: holds no certificate", cert_file.display()))?
        .clone();
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| format!("--tls-key {}: no private key in PEM: {e}", key_file.display()))?;
    // The key must be the certificate's, or every handshake would fail.
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| format!("--tls-key {}: {e}", key_file.display()))?;
    let certified = rustls::sign::CertifiedKey::new(chain.clone(), signing);
    certified.keys_match().map_err(|e| {
        format!(
            "--tls-key {} is not the key of the certificate in {}: {e}",
            key_file.display(),
            cert_file.display()
        )
    })?;
    let serving = Arc::new(Serving {
        sha256: fingerprint(&first),
        chain,
        key,
        source: cert_file.display().to_string(),
    });
    SERVING
        .set(serving.clone())
        .map_err(|_| "a TLS certificate was already installed".to_string())?;
    Ok(serving)
}

/// How a client trusts the agent's certificate.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Its SHA-256 must be this (`--tls-pin`).
    Pinned(String),
    /// One of these CAs (PEM, as the client read them from `--tls-ca`)
    /// must have signed it for the agent's address.
    Ca(String),
    /// Its SHA-256 must be the one the agent announced on the control connection.
    Announced(String),
}

impl Trust {
    /// The word the result records (`pinned`, `ca`, `announced`).
    pub fn word(&self) -> &'static str {
        match self {
            Trust::Pinned(_) => "pinned",
            Trust::Ca(_) => "ca",
            Trust::Announced(_) => "announced",
        }
    }
}

/// Checks the agent's certificate against a fingerprint, and the
/// handshake's signature against the certificate's key.
#[derive(Debug)]
pub struct PinnedVerifier {
    pub sha256: String,
    /// How the fingerprint was come by, for the error: `--tls-pin` or the
    /// agent's announcement.
    pub from: &'static str,
    pub provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = fingerprint(end_entity);
        match seen == self.sha256 {
            true => Ok(ServerCertVerified::assertion()),
            false => Err(rustls::Error::General(format!(
                "the agent's TLS certificate is sha256:{seen}, not sha256:{} ({}); refused before any data",
                self.sha256, self.from
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_has_a_stable_fingerprint() {
        let a = self_signed().unwrap();
        assert_eq!(a.sha256.len(), 64);
        assert_eq!(fingerprint(&a.chain[0]), a.sha256);
        let b = self_signed().unwrap();
        assert_ne!(a.sha256, b.sha256, "a fresh key each time");
        assert_eq!(with_colons("abcd"), "ab:cd");
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("nicbench-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let one = rcgen::generate_simple_self_signed(vec!["one".into()]).unwrap();
        let two = rcgen::generate_simple_self_signed(vec!["two".into()]).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, one.cert.pem()).unwrap();
        std::fs::write(&key, two.key_pair.serialize_pem()).unwrap();
        let err = serve_given(&cert, &key).err().unwrap();
        assert!(err.contains("is not the key of the certificate"), "{err}");
        std::fs::write(&key, "not pem").unwrap();
        let err = serve_given(&cert, &key).err().unwrap();
        assert!(err.contains("no private key"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
