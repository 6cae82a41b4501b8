//! What a test over a transport that encrypts asks for (tls and quic, one
//! TLS 1.3 handshake each): the cipher suite, kernel TLS, and how the
//! client trusts the agent's certificate. A workload flattens
//! [`EncryptionOptions`] into its command line and keeps [`Encryption`] in
//! its parameters (the JSON field `tls`, as the schema has it) without
//! naming the transports that read them; a transport that encrypts
//! another way would add its options here.
//!
//! Files stay where they are named: the client reads `--tls-ca FILE` when
//! it builds the spec, and the spec carries the CA certificates themselves
//! (`ca_pem`), never the file's name. An agent opens no file a client
//! names: a spec with a path (`ca_file`, which clients before issue 67
//! sent) is refused, so the agent neither fails for lack of the client's
//! file nor tells a client which of its own files exist.

use serde::{Deserialize, Serialize};

use crate::model::SpecError;

/// A TLS 1.3 cipher suite, by the name `--cipher` takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Cipher {
    /// TLS_AES_128_GCM_SHA256: AES with a 128-bit key in Galois/Counter Mode.
    #[default]
    #[value(name = "aes128-gcm")]
    Aes128Gcm,
    /// TLS_AES_256_GCM_SHA384: AES with a 256-bit key (14 rounds, not 10).
    #[value(name = "aes256-gcm")]
    Aes256Gcm,
    /// TLS_CHACHA20_POLY1305_SHA256: faster than AES where the CPU has no
    /// AES instructions.
    #[value(name = "chacha20-poly1305")]
    Chacha20Poly1305,
}

impl Cipher {
    pub const ALL: [Cipher; 3] = [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Chacha20Poly1305];

    /// The name `--cipher`, the specs and the cipher speeds use.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "aes128-gcm",
            Cipher::Aes256Gcm => "aes256-gcm",
            Cipher::Chacha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// How rustls names the suite (`TLS13_AES_128_GCM_SHA256`).
    pub fn suite_name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "TLS13_AES_128_GCM_SHA256",
            Cipher::Aes256Gcm => "TLS13_AES_256_GCM_SHA384",
            Cipher::Chacha20Poly1305 => "TLS13_CHACHA20_POLY1305_SHA256",
        }
    }

    /// The suite as rustls' ring provider holds it.
    pub fn suite(self) -> rustls::SupportedCipherSuite {
        use rustls::crypto::ring::cipher_suite as s;
        match self {
            Cipher::Aes128Gcm => s::TLS13_AES_128_GCM_SHA256,
            Cipher::Aes256Gcm => s::TLS13_AES_256_GCM_SHA384,
            Cipher::Chacha20Poly1305 => s::TLS13_CHACHA20_POLY1305_SHA256,
        }
    }
}

impl std::fmt::Display for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The encryption a test asks of its transport (TLS 1.3's options).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Encryption {
    /// The one cipher suite the client offers (`--cipher`).
    #[serde(default)]
    pub cipher: Cipher,
    /// Hand the record layer to kernel TLS (`--ktls`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ktls: bool,
    /// The SHA-256 (hex) the agent's certificate must have (`--tls-pin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_sha256: Option<String>,
    /// The name of a CA file, as clients before issue 67 sent it for the
    /// agent to open. Read from results of those versions; a spec that
    /// carries it is refused ([`Encryption::validate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// The CA certificates of `--tls-ca` as PEM, one of which must have
    /// signed the agent's certificate for the agent's address: read from
    /// the file by the client; only the certificates (no key, no comment)
    /// travel, at most [`MAX_CA_PEM_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
}

/// The most PEM text of CA certificates a spec carries (`--tls-ca`): a
/// test request is at most 64 KiB, and a CA, or a CA and an intermediate,
/// takes one to four KiB.
pub const MAX_CA_PEM_BYTES: usize = 32 * 1024;
/// The largest `--tls-ca` file the client reads (what is not a
/// certificate in it is dropped before the cap above is applied).
const MAX_CA_FILE_BYTES: u64 = 4 << 20;

/// The certificates in `pem` (PEM text; sections of other kinds are
/// skipped). The error says what is wrong; `what` names the source.
pub fn ca_certificates(what: &str, pem: &str) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what}: not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what}: holds no certificate (a PEM file of CA certificates)"));
    }
    Ok(certs)
}

/// Reads `--tls-ca FILE` on the client: its certificates, as PEM text
/// again (keys and comments dropped), at most [`MAX_CA_PEM_BYTES`].
pub fn read_ca_file(path: &str) -> Result<String, String> {
    use base64::Engine;
    use std::io::Read;
    let what = format!("--tls-ca {path}");
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{what}: no such file (a PEM file of CA certificates)"),
        _ => format!("{what}: {e}"),
    })?;
    let mut text = String::new();
    file.take(MAX_CA_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{what}: {e} (a PEM file of CA certificates)"))?;
    if text.len() as u64 > MAX_CA_FILE_BYTES {
        return Err(format!(
            "{what}: larger than {} MiB; give the PEM file of the CA that signed the agent's certificate",
            MAX_CA_FILE_BYTES >> 20
        ));
    }
    let mut pem = String::new();
    for cert in ca_certificates(&what, &text)? {
        let encoded = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in encoded.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    if pem.len() > MAX_CA_PEM_BYTES {
        return Err(format!(
            "{what}: its certificates take {} KiB as PEM, more than the {} KiB a test request carries; \
             give only the CA that signed the agent's certificate (not a system bundle)",
            pem.len().div_ceil(1024),
            MAX_CA_PEM_BYTES / 1024
        ));
    }
    Ok(pem)
}

impl Encryption {
    /// Checks what can be checked before any connection, on both ends:
    /// the pin's form, the CA certificates, and kernel TLS on this host.
    /// A path to a file (`ca_file`) is refused without a look at it. The
    /// error says what to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.ca_file.is_some() {
            // The name is not repeated: whether it exists here is not said.
            return Err(
                "the test names a CA file for the agent to open (ca_file, as nicbench clients before \
                 issue 67 sent --tls-ca); an agent opens no file a client names: a nicbench client of this \
                 version reads --tls-ca itself and sends the certificates"
                    .into(),
            );
        }
        if let Some(pin) = &self.pin_sha256 {
            normalize_pin(pin)?;
        }
        if self.pin_sha256.is_some() && self.ca_pem.is_some() {
            return Err("--tls-pin and --tls-ca both say how to trust the agent: give one".into());
        }
        if let Some(pem) = &self.ca_pem {
            if pem.len() > MAX_CA_PEM_BYTES {
                return Err(format!(
                    "--tls-ca: {} KiB of CA certificates, more than the {} KiB a test carries",
                    pem.len().div_ceil(1024),
                    MAX_CA_PEM_BYTES / 1024
                ));
            }
            ca_certificates("--tls-ca", pem)?;
        }
        if self.ktls {
            if let Some(why) = crate::probe::cipher::ktls_unavailable() {
                return Err(format!(
                    "--ktls: {why}; run without --ktls to seal records in rustls (user space)"
                ));
            }
            return Err(
                "--ktls: this kernel has kernel TLS, but nicbench does not hand rustls' keys to it yet \
                 (it was built and tested on a kernel without CONFIG_TLS); run without --ktls"
                    .into(),
            );
        }
        Ok(())
    }
}

/// The encryption options of a workload that may run over a transport
/// that encrypts (`--transport tls` or `quic`: tcp, rr, sweep), flattened
/// into its command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EncryptionOptions {
    /// The TLS 1.3 cipher suite the client offers (with --transport tls or quic).
    #[arg(
        long,
        value_name = "CIPHER",
        value_enum,
        help_heading = "TLS (--transport tls or quic)"
    )]
    pub cipher: Option<Cipher>,
    /// Trust only an agent certificate with this SHA-256 (64 hex digits,
    /// colons allowed), as `nicbench serve` prints it. Default: the
    /// fingerprint the agent announces, recorded as `trust: announced`.
    #[arg(long, value_name = "SHA256", help_heading = "TLS (--transport tls or quic)")]
    pub tls_pin: Option<String>,
    /// Trust an agent certificate signed by a CA in this PEM file; it must
    /// name the agent's address.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "TLS (--transport tls or quic)",
        conflicts_with = "tls_pin"
    )]
    pub tls_ca: Option<String>,
    /// Seal records in the kernel (kTLS) instead of rustls. Refused where
    /// the kernel has no kernel TLS (CONFIG_TLS), with the reason.
    #[arg(long, help_heading = "TLS (--transport tls or quic)")]
    pub ktls: bool,
}

impl EncryptionOptions {
    /// The spec's TLS options: TLS's defaults over TLS, what was given
    /// otherwise (validation refuses them without TLS), None when neither.
    /// `--tls-ca`'s file is read here, on the client: the spec carries its
    /// certificates. The error says what is wrong with the file.
    pub fn params(&self, over_tls: bool) -> Result<Option<Encryption>, SpecError> {
        let given = self.cipher.is_some() || self.tls_pin.is_some() || self.tls_ca.is_some() || self.ktls;
        if !(given || over_tls) {
            return Ok(None);
        }
        let ca_pem = match &self.tls_ca {
            Some(path) => Some(read_ca_file(path).map_err(SpecError::Invalid)?),
            None => None,
        };
        Ok(Some(Encryption {
            cipher: self.cipher.unwrap_or_default(),
            ktls: self.ktls,
            pin_sha256: self
                .tls_pin
                .as_deref()
                .map(|p| normalize_pin(p).unwrap_or_else(|_| p.to_string())),
            ca_file: None,
            ca_pem,
        }))
    }
}

/// Checks a workload's TLS options against its transport: options given
/// without TLS are refused by name; over TLS, [`Encryption::validate`].
/// `encrypted` names the transports that take them ("tls", "tls or quic").
pub fn check(over_tls: bool, encrypted: &str, transport: &str, tls: Option<&Encryption>) -> Result<(), String> {
    match (over_tls, tls) {
        (false, Some(_)) => Err(format!(
            "--cipher, --tls-pin, --tls-ca and --ktls apply to --transport {encrypted}, not {transport}"
        )),
        (true, Some(t)) => t.validate(),
        _ => Ok(()),
    }
}

/// A SHA-256 fingerprint as the user may write it (hex, with or without
/// colons, either case, `sha256:` in front) in the one form results hold:
/// 64 lower-case hex digits.
pub fn normalize_pin(pin: &str) -> Result<String, String> {
    let hex: String = pin
        .trim()
        .trim_start_matches("sha256:")
        .chars()
        .filter(|c| *c != ':')
        .collect::<String>()
        .to_ascii_lowercase();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "--tls-pin '{pin}': a SHA-256 fingerprint is 64 hex digits (colons allowed), \
             as `nicbench serve` prints it and results record it"
        ));
    }
    Ok(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_read_in_every_usual_form_and_refused_otherwise() {
        let plain = "ab".repeat(32);
        let colons = vec!["AB"; 32].join(":");
        for form in [plain.clone(), colons, format!("sha256:{plain}")] {
            assert_eq!(normalize_pin(&form).unwrap(), plain);
        }
        for bad in ["", "abc", &"zz".repeat(32), &"ab".repeat(33)] {
            assert!(normalize_pin(bad).unwrap_err().contains("64 hex digits"), "{bad}");
        }
    }

    #[test]
    fn cipher_names_round_trip_and_name_rustls_suites() {
        for c in Cipher::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.name()));
            assert_eq!(serde_json::from_str::<Cipher>(&json).unwrap(), c);
            assert_eq!(format!("{:?}", c.suite().suite()), c.suite_name());
            assert!(crate::probe::cipher::CIPHERS.contains(&c.name()));
        }
    }

    /// A self-signed CA certificate as PEM.
    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn two_ways_of_trust_and_a_missing_ca_file_are_refused() {
        let both = Encryption {
            pin_sha256: Some("00".repeat(32)),
            ca_pem: Some(ca_pem()),
            ..Encryption::default()
        };
        assert!(both.validate().unwrap_err().contains("give one"));
        let options = |path: &str| EncryptionOptions {
            tls_ca: Some(path.into()),
            ..EncryptionOptions::default()
        };
        let missing = options("/nonexistent/ca.pem").params(true).unwrap_err().to_string();
        assert!(
            missing.contains("--tls-ca /nonexistent/ca.pem: no such file"),
            "{missing}"
        );
        let no_cert = Encryption {
            ca_pem: Some("hello".into()),
            ..Encryption::default()
        };
        assert!(no_cert.validate().unwrap_err().contains("holds no certificate"));
    }

    /// Issue 67: the agent opened the path the client sent (and told it
    /// which of its files exist). A spec naming a file is refused, whether
    /// the file exists or not, in the same words.
    #[test]
    fn a_spec_that_names_a_file_is_refused_without_a_look_at_it() {
        let refusal = |path: &str| {
            Encryption {
                ca_file: Some(path.into()),
                ..Encryption::default()
            }
            .validate()
            .unwrap_err()
        };
        let exists = refusal("/etc/hostname");
        assert!(exists.contains("an agent opens no file a client names"), "{exists}");
        assert!(!exists.contains("/etc"), "{exists}");
        assert_eq!(exists, refusal("/etc/does-not-exist"));
    }

    /// The client reads the file: the spec holds its certificates and no
    /// name; a key in the same file stays home; the cap is said.
    #[test]
    fn the_client_sends_the_certificates_of_its_ca_file_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let pem = ca_pem();
        let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, format!("# my CA\n{key}{pem}")).unwrap();
        let path = file.to_string_lossy().into_owned();
        let params = EncryptionOptions {
            tls_ca: Some(path.clone()),
            ..EncryptionOptions::default()
        }
        .params(true)
        .unwrap()
        .unwrap();
        assert_eq!(params.ca_file, None);
        let sent = params.ca_pem.clone().unwrap();
        assert_eq!(sent.replace('\n', ""), pem.replace(['\n', '\r'], ""));
        assert!(!sent.contains("PRIVATE KEY") && !sent.contains("my CA"), "{sent}");
        params.validate().unwrap();
        let json = serde_json::to_string(&params).unwrap();
        assert!(!json.contains(&path) && !json.contains("ca_file"), "{json}");
        // A bundle past the cap: refused on the client, saying the cap.
        std::fs::write(&file, pem.repeat(MAX_CA_PEM_BYTES / pem.len() + 1)).unwrap();
        let big = EncryptionOptions {
            tls_ca: Some(path),
            ..EncryptionOptions::default()
        }
        .params(true)
        .unwrap_err()
        .to_string();
        assert!(big.contains("more than the 32 KiB a test request carries"), "{big}");
    }
}
