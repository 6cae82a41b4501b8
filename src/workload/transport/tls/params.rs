//! What a TLS test asks for: the cipher suite, kernel TLS, and how the
//! client trusts the agent's certificate. Kept in the spec of a stream
//! workload over TLS (`tls` in the `tcp` workload's parameters).

use serde::{Deserialize, Serialize};

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

/// The TLS options of a test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsParams {
    /// The one cipher suite the client offers (`--cipher`).
    #[serde(default)]
    pub cipher: Cipher,
    /// Hand the record layer to kernel TLS (`--ktls`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ktls: bool,
    /// The SHA-256 (hex) the agent's certificate must have (`--tls-pin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_sha256: Option<String>,
    /// A PEM file of CA certificates, one of which must have signed the
    /// agent's certificate for the agent's address (`--tls-ca`); read by
    /// the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

impl TlsParams {
    /// Checks what can be checked before any connection: the pin's form,
    /// the CA file's existence, and kernel TLS on this host. The error says
    /// what to change.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(pin) = &self.pin_sha256 {
            normalize_pin(pin)?;
        }
        if self.pin_sha256.is_some() && self.ca_file.is_some() {
            return Err("--tls-pin and --tls-ca both say how to trust the agent: give one".into());
        }
        if let Some(path) = &self.ca_file {
            if !std::path::Path::new(path).is_file() {
                return Err(format!("--tls-ca {path}: no such file (a PEM file of CA certificates)"));
            }
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

/// The TLS options of a workload that runs over `--transport tls` (tcp,
/// rr), flattened into its command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsOptions {
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

impl TlsOptions {
    /// The spec's TLS options: TLS's defaults over TLS, what was given
    /// otherwise (validation refuses them without TLS), None when neither.
    pub fn params(&self, over_tls: bool) -> Option<TlsParams> {
        let given = self.cipher.is_some() || self.tls_pin.is_some() || self.tls_ca.is_some() || self.ktls;
        (given || over_tls).then(|| TlsParams {
            cipher: self.cipher.unwrap_or_default(),
            ktls: self.ktls,
            pin_sha256: self
                .tls_pin
                .as_deref()
                .map(|p| normalize_pin(p).unwrap_or_else(|_| p.to_string())),
            ca_file: self.tls_ca.clone(),
        })
    }
}

/// Checks a workload's TLS options against its transport: options given
/// without TLS are refused by name; over TLS, [`TlsParams::validate`].
/// `encrypted` names the transports that take them ("tls", "tls or quic").
pub fn check(over_tls: bool, encrypted: &str, transport: &str, tls: Option<&TlsParams>) -> Result<(), String> {
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

    #[test]
    fn two_ways_of_trust_and_a_missing_ca_file_are_refused() {
        let both = TlsParams {
            pin_sha256: Some("00".repeat(32)),
            ca_file: Some("/etc/hostname".into()),
            ..TlsParams::default()
        };
        assert!(both.validate().unwrap_err().contains("give one"));
        let missing = TlsParams {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..TlsParams::default()
        };
        assert!(missing.validate().unwrap_err().contains("no such file"));
    }
}
