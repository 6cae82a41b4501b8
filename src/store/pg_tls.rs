//! TLS to PostgreSQL, with libpq's `sslmode` and `sslrootcert`: rustls
//! (on ring, as the rest of nicbench) behind the client crate's
//! `MakeTlsConnect`, through tokio-rustls.
//!
//! | sslmode | TLS | the server's certificate |
//! |---|---|---|
//! | disable | never | - |
//! | allow, prefer | if the server offers it | not checked |
//! | require | or fail | not checked; checked as verify-ca if a root certificate file exists |
//! | verify-ca | or fail | signed by a CA in `sslrootcert` |
//! | verify-full | or fail | signed by such a CA, and naming the host connected to |
//!
//! `sslrootcert=FILE` (PEM) else `PGSSLROOTCERT` else
//! `~/.postgresql/root.crt`; `sslrootcert=system` trusts the system's CA
//! bundle (the one OpenSSL, so libpq, reads) and asks for verify-full,
//! as libpq 16 does. A unix socket never carries TLS (the server refuses
//! it there), so over one every mode connects in the clear, as libpq.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// libpq's `sslmode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, String> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                ))
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The client crate's mode: it knows whether to ask for TLS, the
    /// certificate check is ours.
    pub fn for_client(self) -> ::postgres::config::SslMode {
        use ::postgres::config::SslMode as Client;
        match self {
            SslMode::Disable => Client::Disable,
            SslMode::Allow | SslMode::Prefer => Client::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Client::Require,
        }
    }
}

/// Where the trusted CA certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Roots {
    /// A PEM file (`sslrootcert=FILE`, `PGSSLROOTCERT`, `~/.postgresql/root.crt`).
    File(PathBuf),
    /// The system's CA bundle (`sslrootcert=system`).
    System,
}

/// What TLS a connection uses: libpq's settings, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tls {
    /// The mode asked for (`require` with a root file is checked as verify-ca).
    pub mode: SslMode,
    /// The CAs the server's certificate is checked against; None: not checked.
    pub roots: Option<Roots>,
    /// Whether the host name is checked too (verify-full).
    pub check_name: bool,
}

/// The TLS settings from the URL's `sslmode` and `sslrootcert` (None:
/// not given), else `PGSSLMODE`, `PGSSLROOTCERT`, else libpq's defaults.
pub fn resolve(sslmode: Option<&str>, sslrootcert: Option<&str>) -> Result<Tls, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let root_text = sslrootcert.map(str::to_string).or_else(|| env("PGSSLROOTCERT"));
    let system = root_text.as_deref() == Some("system");
    let mode_text = sslmode.map(str::to_string).or_else(|| env("PGSSLMODE"));
    let mode = match mode_text {
        Some(text) => SslMode::parse(&text)?,
        None if system => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if system && mode != SslMode::VerifyFull {
        return Err(format!(
            "sslrootcert=system trusts every CA of the system, so it needs sslmode=verify-full (the host name \
             checked too), not sslmode={}: use sslmode=verify-full, or give your own CA's file as sslrootcert=FILE",
            mode.name()
        ));
    }
    let root_file = match (&root_text, system) {
        (_, true) => None,
        (Some(file), false) => Some(PathBuf::from(file)),
        (None, false) => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".postgresql/root.crt")),
    };
    let roots = match mode {
        SslMode::Disable | SslMode::Allow | SslMode::Prefer => None,
        SslMode::Require => root_file.filter(|f| f.is_file()).map(Roots::File),
        SslMode::VerifyCa | SslMode::VerifyFull if system => Some(Roots::System),
        SslMode::VerifyCa | SslMode::VerifyFull => match root_file {
            Some(file) if file.is_file() => Some(Roots::File(file)),
            file => {
                return Err(format!(
                    "sslmode={} checks the server's certificate against a root certificate, and {} does not \
                     exist: give the CA's certificate (PEM) as sslrootcert=FILE (or PGSSLROOTCERT), use the \
                     system's CAs with sslrootcert=system, or use sslmode=require to encrypt without the check",
                    mode.name(),
                    file.map_or("~/.postgresql/root.crt".into(), |f| f.display().to_string())
                ))
            }
        },
    };
    Ok(Tls {
        mode,
        roots,
        check_name: mode == SslMode::VerifyFull,
    })
}

/// The system's CA bundle: `SSL_CERT_FILE`, else the first of the
/// distributions' usual places that exists.
fn system_bundle() -> Result<PathBuf, String> {
    if let Some(file) = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
        return Ok(PathBuf::from(file));
    }
    [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|f| f.is_file())
    .ok_or_else(|| {
        "sslrootcert=system: no CA bundle found (looked for /etc/ssl/certs/ca-certificates.crt and the like): \
         install ca-certificates, set SSL_CERT_FILE, or give the CA's file as sslrootcert=FILE"
            .to_string()
    })
}

/// The certificates in the PEM file `file`, as trust anchors.
fn root_store(file: &Path) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    let certificates = CertificateDer::pem_file_iter(file)
        .and_then(|all| all.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("sslrootcert {}: cannot read its certificates ({e})", file.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!(
            "sslrootcert {}: holds no certificate a CA could sign with: give the CA's certificate in PEM \
             (-----BEGIN CERTIFICATE-----)",
            file.display()
        ));
    }
    Ok(roots)
}

/// The connector for `tls`: a rustls client whose certificate check is
/// the mode's.
pub fn connector(tls: &Tls) -> Result<MakeRustls, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match &tls.roots {
        None => Arc::new(Unchecked { provider }),
        Some(roots) => {
            let file = match roots {
                Roots::File(file) => file.clone(),
                Roots::System => system_bundle()?,
            };
            let webpki =
                rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(root_store(&file)?), provider)
                    .build()
                    .map_err(|e| format!("sslrootcert {}: {e}", file.display()))?;
            Arc::new(Checked {
                webpki,
                check_name: tls.check_name,
            })
        }
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustls {
        config: Arc::new(config),
    })
}

/// require without a root certificate, allow and prefer: the session is
/// encrypted and the handshake's signature checked against the
/// certificate's key, but nobody vouches for the certificate (libpq's
/// behaviour; verify-ca or verify-full stop a man in the middle).
#[derive(Debug)]
struct Unchecked {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

/// verify-ca and verify-full: the chain to a trusted CA (rustls' webpki
/// check), and for verify-full the host name too. webpki checks the
/// chain before the name, so a name error means the chain was good.
#[derive(Debug)]
struct Checked {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
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

impl ServerCertVerifier for Checked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }))
                if !self.check_name =>
            {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// What the client crate asks for a TLS connection: one per host.
#[derive(Clone)]
pub struct MakeRustls {
    config: Arc<rustls::ClientConfig>,
}

/// A TLS connection about to be made to one host.
pub struct RustlsConnect {
    config: Arc<rustls::ClientConfig>,
    /// None for a unix socket, over which there is no TLS.
    name: Option<ServerName<'static>>,
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        let name = match domain {
            "" => None,
            _ => Some(ServerName::try_from(domain.to_string()).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("host {domain:?} is not a name or address TLS can check ({e})"),
                )
            })?),
        };
        Ok(RustlsConnect {
            config: self.config.clone(),
            name,
        })
    }
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let name = self
                .name
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host name to check TLS against"))?;
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(name, stream)
                .await?;
            Ok(RustlsStream(stream))
        })
    }
}

/// An encrypted connection to the server.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// No channel binding: SCRAM runs without it (as libpq's default
    /// `channel_binding=prefer` does when the client offers none).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

/// What to do about a failed TLS connection, from the rustls error in
/// `error`'s chain (None: not a certificate or TLS matter).
pub fn advice(error: &(dyn std::error::Error + 'static), tls: &Tls, host: &str) -> Option<String> {
    use rustls::{CertificateError, Error};
    let mut next = Some(error);
    while let Some(e) = next {
        if e.to_string().contains("server does not support TLS") {
            return Some(format!(
                "the server does not offer TLS, and sslmode={} requires it: turn TLS on at the server \
                 (ssl = on, ssl_cert_file, ssl_key_file in postgresql.conf), or use sslmode=prefer \
                 (or disable) on a network you trust",
                tls.mode.name()
            ));
        }
        let rustls_error = e
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<Error>())
            .or_else(|| e.downcast_ref::<Error>());
        if let Some(rustls_error) = rustls_error {
            let roots = match &tls.roots {
                Some(Roots::File(file)) => format!("the CA in {}", file.display()),
                Some(Roots::System) => "the system's CAs".into(),
                None => "no CA".into(),
            };
            return Some(match rustls_error {
                Error::InvalidCertificate(CertificateError::NotValidForName)
                | Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => format!(
                    "the server's certificate does not name the host {host} (sslmode=verify-full checks it): \
                     connect by a name or address the certificate holds, or use sslmode=verify-ca to check \
                     only that {roots} signed it"
                ),
                Error::InvalidCertificate(CertificateError::UnknownIssuer)
                | Error::InvalidCertificate(CertificateError::BadSignature) => format!(
                    "the server's certificate is not signed by {roots} (sslmode={}): give the CA that \
                     signed the server's certificate as sslrootcert=FILE",
                    tls.mode.name()
                ),
                Error::InvalidCertificate(CertificateError::Expired)
                | Error::InvalidCertificate(CertificateError::ExpiredContext { .. }) => {
                    "the server's certificate has expired: the server needs a new one".into()
                }
                other => format!("TLS with the server failed ({other})"),
            });
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    //! On a real server of the test's own with `ssl = on` (a CA and a
    //! server certificate made here, in temporary directories): what each
    //! sslmode connects to, seen from the server (`pg_stat_ssl`), and what
    //! a refused connection says.
    use crate::store::postgres::connect;
    use crate::store::testing::{cluster::Cluster, cluster::ServerTls, or_skip};

    /// The name in the server's certificate (found through hostaddr, so
    /// no resolver is asked).
    const SERVER_NAME: &str = "archive.nicbench.test";

    /// A CA and the PEM of its certificate.
    fn ca(name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        (params.self_signed(&key).unwrap(), key)
    }

    /// A server certificate for [`SERVER_NAME`] signed by `ca`.
    fn server_tls(ca: &(rcgen::Certificate, rcgen::KeyPair)) -> ServerTls {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![SERVER_NAME.to_string()]).unwrap();
        let cert = params.signed_by(&key, &ca.0, &ca.1).unwrap();
        ServerTls {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A directory with `ca.crt` (the server's CA) and `other.crt` (a CA
    /// that signed nothing here), and a server with TLS on.
    fn tls_server() -> Option<(tempfile::TempDir, Cluster)> {
        let dir = tempfile::tempdir().unwrap();
        let authority = ca("nicbench test CA");
        std::fs::write(dir.path().join("ca.crt"), authority.0.pem()).unwrap();
        std::fs::write(dir.path().join("other.crt"), ca("another CA").0.pem()).unwrap();
        let cluster = or_skip(Cluster::start_on_tcp(Some(&server_tls(&authority))))?;
        Some((dir, cluster))
    }

    /// Whether the session at `url` is encrypted, as the server sees it.
    fn encrypted(url: &str) -> Result<bool, String> {
        let db = connect(url).map_err(|e| e.to_string())?;
        let row = db
            .query_row("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
            .unwrap()
            .expect("one row for this backend");
        Ok(row.get::<bool>(0).unwrap())
    }

    #[test]
    fn require_and_prefer_encrypt_disable_does_not_and_the_verify_modes_pass_with_the_right_ca() {
        let Some((dir, server)) = tls_server() else { return };
        let ca = dir.path().join("ca.crt");
        let at = |host: &str, query: &str| server.tcp_url(host, "postgres", query);
        assert_eq!(encrypted(&at("127.0.0.1", "sslmode=require")), Ok(true));
        assert_eq!(encrypted(&at("127.0.0.1", "sslmode=prefer")), Ok(true));
        assert_eq!(encrypted(&at("127.0.0.1", "sslmode=disable")), Ok(false));
        let full = format!("sslmode=verify-full&sslrootcert={}", ca.display());
        assert_eq!(encrypted(&at(SERVER_NAME, &full)), Ok(true));
        // verify-ca checks the chain, not the name.
        let chain = format!("sslmode=verify-ca&sslrootcert={}", ca.display());
        assert_eq!(encrypted(&at("127.0.0.1", &chain)), Ok(true));
    }

    #[test]
    fn a_certificate_from_another_ca_is_refused_naming_the_ca_file() {
        let Some((dir, server)) = tls_server() else { return };
        let other = dir.path().join("other.crt");
        for mode in ["verify-full", "verify-ca", "require"] {
            // require with a root certificate checks it, as libpq.
            let url = server.tcp_url(
                SERVER_NAME,
                "postgres",
                &format!("sslmode={mode}&sslrootcert={}", other.display()),
            );
            let error = encrypted(&url).unwrap_err();
            assert!(
                error.contains("not signed by the CA in") && error.contains(&other.display().to_string()),
                "{mode}: {error}"
            );
        }
    }

    #[test]
    fn verify_full_refuses_a_certificate_for_another_host_name() {
        let Some((dir, server)) = tls_server() else { return };
        let query = format!(
            "sslmode=verify-full&sslrootcert={}",
            dir.path().join("ca.crt").display()
        );
        let error = encrypted(&server.tcp_url("127.0.0.1", "postgres", &query)).unwrap_err();
        assert!(
            error.contains("does not name the host 127.0.0.1") && error.contains("sslmode=verify-ca"),
            "{error}"
        );
    }

    #[test]
    fn require_against_a_server_without_tls_fails_saying_how_to_turn_it_on() {
        let Some(server) = or_skip(Cluster::start_on_tcp(None)) else {
            return;
        };
        let error = encrypted(&server.tcp_url("127.0.0.1", "postgres", "sslmode=require")).unwrap_err();
        assert!(
            error.contains("does not offer TLS") && error.contains("ssl = on"),
            "{error}"
        );
        assert_eq!(
            encrypted(&server.tcp_url("127.0.0.1", "postgres", "sslmode=prefer")),
            Ok(false)
        );
    }
}
