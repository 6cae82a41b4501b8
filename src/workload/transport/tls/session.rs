//! The TLS handshakes of a test's data connections, after admission and
//! before the test starts: the client offers the one cipher suite the spec
//! names and TLS 1.3 only; the agent takes any TLS 1.3 suite and presents
//! its certificate ([`super::cert`]). Every connection of a side shakes
//! hands on a thread of its own, so the ends need not agree on an order.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use rustls::pki_types::ServerName;
use socket2::Socket;

use super::cert::{self, PinnedVerifier, Trust};
use super::TlsEnd;
use crate::workload::base::WorkloadError;
use crate::workload::transport::admission::Deadlined;
use crate::workload::transport::encryption::{normalize_pin, Encryption};

/// A connection's TLS state once its handshake is done, and what it
/// negotiated.
pub struct Session {
    pub connection: rustls::Connection,
    pub end: TlsEnd,
}

/// The provider every config is built on: rustls' ring primitives with
/// the cipher suites given.
fn provider(suites: Vec<rustls::SupportedCipherSuite>) -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    })
}

/// How the client will trust the agent: `--tls-pin`, else `--tls-ca`, else
/// the fingerprint the agent announced in its facts. None announced and
/// neither option given is an error: a client never trusts nothing.
fn trust(params: &Encryption, announced: Option<&str>) -> Result<Trust, String> {
    if let Some(pin) = &params.pin_sha256 {
        return normalize_pin(pin).map(Trust::Pinned);
    }
    if let Some(pem) = &params.ca_pem {
        return Ok(Trust::Ca(pem.clone()));
    }
    match announced {
        Some(sha) => normalize_pin(sha)
            .map(Trust::Announced)
            .map_err(|_| format!("the agent announced a malformed certificate fingerprint '{sha}'")),
        None => Err("the agent announced no TLS certificate (an agent before TLS?): give --tls-pin or --tls-ca".into()),
    }
}

/// The client's TLS configuration for `params` and `trust`, and the name
/// it asks the agent's certificate for (its address, for a CA's check).
fn client_config(
    params: &Encryption,
    trust: &Trust,
    agent: IpAddr,
) -> Result<(Arc<rustls::ClientConfig>, ServerName<'static>), String> {
    let provider = provider(vec![params.cipher.suite()]);
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS 1.3 with {}: {e}", params.cipher))?;
    let (config, name) = match trust {
        Trust::Pinned(sha) | Trust::Announced(sha) => {
            let verifier = PinnedVerifier {
                sha256: sha.clone(),
                from: match trust {
                    Trust::Pinned(_) => "the fingerprint --tls-pin gave",
                    _ => "the fingerprint the agent announced on the control connection",
                },
                provider,
            };
            let config = builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth();
            (
                config,
                ServerName::try_from("nicbench-agent").expect("a valid DNS name"),
            )
        }
        Trust::Ca(pem) => {
            // The certificates the client read from its --tls-ca file.
            let mut roots = rustls::RootCertStore::empty();
            for cert in crate::workload::transport::encryption::ca_certificates("--tls-ca", pem)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("--tls-ca: a certificate rustls cannot use: {e}"))?;
            }
            let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("--tls-ca: {e}"))?;
            let config = builder.with_webpki_verifier(verifier).with_no_client_auth();
            (config, ServerName::IpAddress(agent.into()))
        }
    };
    Ok((Arc::new(config), name))
}

/// The agent's TLS configuration: every TLS 1.3 suite, its certificate,
/// no session tickets (each connection of a test is new).
fn server_config() -> Result<Arc<rustls::ServerConfig>, String> {
    let serving = cert::serving()?;
    let suites = super::Cipher::ALL.iter().map(|c| c.suite()).collect();
    let mut config = rustls::ServerConfig::builder_with_provider(provider(suites))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS 1.3: {e}"))?
        .with_no_client_auth()
        .with_single_cert(serving.chain.clone(), serving.key.clone_key())
        .map_err(|e| format!("the agent's certificate: {e}"))?;
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// What a client opens each of its TLS connections with: the config, the
/// name it asks the certificate for, and how it trusts it.
pub struct ClientSetup {
    /// Shared with QUIC, which adds its ALPN to a copy.
    pub(crate) config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    trust: Trust,
}

impl ClientSetup {
    /// Trust as `--tls-pin`, `--tls-ca` or the agent's announcement says
    /// (its facts in `net`); the cipher speeds measured now, not later.
    pub fn new(params: &Encryption, net: &crate::workload::base::ClientNet) -> Result<ClientSetup, WorkloadError> {
        let announced = net.agent_tls.as_ref().and_then(|t| t.certificate_sha256.as_deref());
        let trust = trust(params, announced).map_err(WorkloadError::Setup)?;
        let (config, name) = client_config(params, &trust, net.agent_ip).map_err(WorkloadError::Setup)?;
        crate::probe::cipher::speeds();
        Ok(ClientSetup { config, name, trust })
    }

    /// The name the client asks the agent's certificate for, as text:
    /// `nicbench-agent` when pinned, the agent's address under a CA.
    pub fn server_name(&self) -> String {
        match &self.name {
            ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
            name => name.to_str().into_owned(),
        }
    }

    /// How this client trusts the agent, as results record it.
    pub fn trust_word(&self) -> &'static str {
        self.trust.word()
    }

    /// A new client connection, before its handshake.
    pub fn open(&self) -> Result<rustls::Connection, String> {
        rustls::ClientConnection::new(self.config.clone(), self.name.clone())
            .map(rustls::Connection::from)
            .map_err(|e| e.to_string())
    }

    /// One handshake on `socket` by `deadline`.
    pub fn handshake(&self, socket: &Socket, deadline: Instant) -> Result<Session, String> {
        handshake(self.open()?, socket, Some(&self.trust), deadline)
    }

    /// Every stream's handshake, at once, within 10 s.
    pub fn handshake_all(&self, sockets: &[(u32, Socket)]) -> Result<Vec<(u32, Session)>, WorkloadError> {
        let refs: Vec<(u32, &Socket)> = sockets.iter().map(|(id, s)| (*id, s)).collect();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        handshake_all(&refs, &|| self.open(), Some(&self.trust), deadline)
    }
}

/// What an agent opens each of its TLS connections with.
pub struct ServerSetup {
    pub(crate) config: Arc<rustls::ServerConfig>,
}

impl ServerSetup {
    pub fn new() -> Result<ServerSetup, WorkloadError> {
        let config = server_config().map_err(WorkloadError::Setup)?;
        crate::probe::cipher::speeds();
        Ok(ServerSetup { config })
    }

    /// A new server connection, before its handshake.
    pub fn open(&self) -> Result<rustls::Connection, String> {
        rustls::ServerConnection::new(self.config.clone())
            .map(rustls::Connection::from)
            .map_err(|e| e.to_string())
    }

    /// One handshake on `socket` by `deadline`.
    pub fn handshake(&self, socket: &Socket, deadline: Instant) -> Result<Session, String> {
        handshake(self.open()?, socket, None, deadline)
    }

    /// Every accepted stream's handshake, at once, by `deadline`.
    pub fn handshake_all(
        &self,
        sockets: &[(u32, Socket)],
        deadline: Instant,
    ) -> Result<Vec<(u32, Session)>, WorkloadError> {
        let refs: Vec<(u32, &Socket)> = sockets.iter().map(|(id, s)| (*id, s)).collect();
        handshake_all(&refs, &|| self.open(), None, deadline)
    }
}

/// Shakes hands on every socket at once, one thread each, by `deadline`:
/// each connection from `open` (a client's or a server's). The first
/// error ends it, naming the stream.
fn handshake_all(
    sockets: &[(u32, &Socket)],
    open: &(dyn Fn() -> Result<rustls::Connection, String> + Sync),
    trust: Option<&Trust>,
    deadline: Instant,
) -> Result<Vec<(u32, Session)>, WorkloadError> {
    let results: Vec<(u32, Result<Session, String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = sockets
            .iter()
            .map(|&(id, socket)| (id, scope.spawn(move || handshake(open()?, socket, trust, deadline))))
            .collect();
        handles
            .into_iter()
            .map(|(id, h)| {
                (
                    id,
                    h.join()
                        .unwrap_or_else(|_| Err("the handshake's thread panicked".to_string())),
                )
            })
            .collect()
    });
    results
        .into_iter()
        .map(|(id, r)| {
            r.map(|s| (id, s))
                .map_err(|e| WorkloadError::Setup(format!("TLS handshake of data stream {id}: {e}")))
        })
        .collect()
}

/// One handshake on `socket`, whole by `deadline` (each read and write
/// waits only what is left of it, so a peer sending one byte at a time
/// is cut off there), its timeouts cleared after.
fn handshake(
    mut connection: rustls::Connection,
    socket: &Socket,
    trust: Option<&Trust>,
    deadline: Instant,
) -> Result<Session, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    let start = Instant::now();
    let mut io = Deadlined::new(socket, deadline);
    let shaken = (|| {
        while connection.is_handshaking() {
            connection.complete_io(&mut io)?;
        }
        while connection.wants_write() {
            connection.write_tls(&mut io)?;
        }
        Ok::<(), std::io::Error>(())
    })();
    let seconds = start.elapsed().as_secs_f64();
    io.clear()
        .map_err(|e| format!("clearing the handshake's timeout: {e}"))?;
    shaken.map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("not done within {:.1} s: {e}", left.as_secs_f64())
        }
        // The client's own refusal (a pin that does not match) in its own words.
        _ => match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::General(words)) => words.clone(),
            _ => e.to_string(),
        },
    })?;
    let certificate_sha256 = connection
        .peer_certificates()
        .and_then(|c| c.first())
        .map(cert::fingerprint)
        .or_else(|| cert::serving_now().map(|s| s.sha256.clone()))
        .unwrap_or_default();
    let end = TlsEnd {
        version: connection
            .protocol_version()
            .map_or("unknown".into(), |v| format!("{v:?}")),
        cipher_suite: connection
            .negotiated_cipher_suite()
            .map_or("unknown".into(), |s| format!("{:?}", s.suite())),
        handshake_seconds: seconds,
        record_layer: "rustls".into(),
        certificate_sha256,
        trust: trust.map(|t| t.word().to_string()),
        cipher_one_core_bits_per_second: None,
        handshakes: None,
    };
    Ok(Session { connection, end })
}
