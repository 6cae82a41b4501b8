//! TLS 1.3 over TCP, from rustls: a byte stream whose records are sealed
//! in user space. The data connection is admitted like TCP's (the session
//! token, in the clear), then the two ends shake hands before the test
//! starts, so the handshake is timed on its own and never inside the
//! measured interval.
//!
//! - [`cert`]: the certificate an agent presents (self-signed, made at its
//!   first TLS test, unless `serve --tls-cert` gives one) and how a client
//!   trusts it: pinned by its SHA-256, or by a given CA, or the fingerprint
//!   the agent announced on the control connection, said so in the result;
//! - [`session`]: the handshakes, both ends;
//! - [`stream`]: the hot loops of a TLS stream end.
//!
//! The record layer stays in rustls: kernel TLS (`--ktls`) is refused
//! with the reason (a kernel without CONFIG_TLS), see [`Encryption`].

pub mod cert;
pub mod session;
pub mod stream;
pub mod wire;

use serde::{Deserialize, Serialize};
use socket2::{Protocol, Type};

use super::stream::{ConnectOptions, Serving, Streams};
use super::{About, Delivery, Transport};
use crate::linerate::Stack;
use crate::workload::base::runner::TaskEnd;
use crate::workload::base::{AgentNet, ClientNet, WorkloadError};

pub use super::encryption::{Cipher, Encryption};

/// TLS 1.3 over TCP.
pub struct Tls;

static ABOUT: About = About {
    name: "tls",
    label: "TLS",
    delivery: Delivery::Stream,
    socket: (Type::STREAM, Some(Protocol::TCP)),
    // TCP's headers with timestamps. The model leaves out each record's
    // own 22 bytes (header, content type, tag) per 16 KiB: 0.13%.
    stack: [Stack::Tcp4Ts, Stack::Tcp6Ts],
};

impl Transport for Tls {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn kernel_stream(&self) -> bool {
        false
    }

    fn tls_handshake(&self) -> bool {
        true
    }

    /// TLS's options checked; then what needs the bytes as the kernel
    /// holds them, which rustls seals and opens in user space.
    fn refuse(&self, asked: &super::Asked) -> Result<(), String> {
        use super::Setting;
        super::check_tls_options(self, asked)?;
        let chosen_by = asked.chosen_by;
        for &(option, setting) in &asked.options {
            // The short form of `-Z/--zerocopy`, as the hint names it.
            let short = option.split('/').next().unwrap_or(option);
            match setting {
                Setting::ZeroCopy => {
                    return Err(format!(
                        "{option} with {chosen_by} tls: rustls seals each record in user space, so there is no \
                         file page or user page the kernel could send as it is; drop {short}"
                    ))
                }
                Setting::Discard => {
                    return Err(format!(
                        "{option} with {chosen_by} tls: records must be read to be opened and checked; drop {short}"
                    ))
                }
                Setting::Spin => {
                    return Err(format!(
                        "{option} polls the socket for data; over TLS records are opened in rustls, which waits \
                         on the socket: drop {short}"
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The handshakes of TLS and QUIC alike: QUIC's is TLS 1.3's, recorded
    /// under the same key.
    fn summarize(&self, trial: &mut crate::model::TrialResult) {
        summarize(trial)
    }

    /// The handshakes' line; with the costs, what the cipher cost each end.
    fn write_details(
        &self,
        trial: &crate::model::TrialResult,
        details: super::Details,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        match details {
            super::Details::Costs => write_details(trial, out),
            super::Details::Handshakes | super::Details::Connection => write_handshakes(trial, out),
        }
    }

    fn findings(&self, trial: &crate::model::TrialResult) -> Vec<crate::model::Verdict> {
        cipher_findings(trial)
    }

    /// Each cipher's speed on one core, AES instructions, kernel TLS; and
    /// on an agent the certificate it presents.
    fn host_facts(&self, facts: &mut crate::model::HostFacts) {
        let mut tls = crate::probe::cipher::facts();
        if let Some(serving) = cert::serving_now() {
            tls.certificate_sha256 = Some(serving.sha256.clone());
            tls.certificate_source = Some(serving.source.clone());
        }
        facts.tls = Some(tls);
    }

    fn serve(
        &self,
        net: &AgentNet,
        options: &ConnectOptions,
        streams: usize,
    ) -> Result<Box<dyn Serving>, WorkloadError> {
        Ok(Box::new(stream::TlsServing::bind(net, options, streams)?))
    }

    fn dial(
        &self,
        net: &ClientNet,
        port: u16,
        ids: &[u32],
        options: &ConnectOptions,
    ) -> Result<Streams, WorkloadError> {
        stream::dial(net, port, ids, options)
    }
}

/// Key of a TLS stream end's record in its extras.
pub const KEY: &str = "tls";

/// What one end of a TLS stream negotiated and how long its handshake took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsEnd {
    /// `TLSv1_3`.
    pub version: String,
    /// The cipher suite the handshake settled on (`TLS13_AES_128_GCM_SHA256`).
    pub cipher_suite: String,
    /// From this end's first handshake byte to its last, seconds: the
    /// client's includes the round trip.
    pub handshake_seconds: f64,
    /// Where records were sealed and opened: `rustls` (user space).
    pub record_layer: String,
    /// SHA-256 of the agent's certificate (hex), as this end saw it.
    pub certificate_sha256: String,
    /// On the client: how it trusted that certificate: `pinned`
    /// (`--tls-pin`), `ca` (`--tls-ca`), or `announced` (the fingerprint
    /// the agent sent on the control connection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
    /// The most one core of this end's host seals (a sender) or opens (a
    /// receiver) with the negotiated cipher, bits per second of plaintext
    /// ([`crate::probe::cipher`]): the bound this stream is weighed against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_one_core_bits_per_second: Option<f64>,
    /// With a connection per transaction (`rr --crr`): how many handshakes
    /// this end made; `handshake_seconds` is then their mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshakes: Option<u64>,
}

impl TlsEnd {
    /// Adds one more handshake of a connection per transaction: its
    /// settings, and its time into the mean.
    pub fn add_handshake(&mut self, one: &TlsEnd) {
        let n = self.handshakes.unwrap_or(0);
        let mean = (self.handshake_seconds * n as f64 + one.handshake_seconds) / (n + 1) as f64;
        *self = TlsEnd {
            handshake_seconds: mean,
            handshakes: Some(n + 1),
            cipher_one_core_bits_per_second: self.cipher_one_core_bits_per_second,
            ..one.clone()
        };
    }
}

/// Key of a trial's handshake totals in its sum (`sum.tls`).
pub const SUM_KEY: &str = "tls";

/// The handshakes of a trial, over all its streams (`sum.tls`): what
/// compare's `handshake` figure reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandshakeTotal {
    /// The client's handshake time, seconds, the mean over its handshakes
    /// (one per stream; one per transaction with `rr --crr`; QUIC's streams
    /// share one): from its first handshake byte to its last, so one round
    /// trip is in it.
    pub client_handshake_seconds: f64,
    /// The agent's, the same way: from the client's hello to its last byte.
    pub agent_handshake_seconds: f64,
}

/// Puts the handshake totals of a trial whose stream ends have a TLS
/// record (TLS or QUIC) into `sum.tls`; a trial without them is left alone.
pub fn summarize(trial: &mut crate::model::TrialResult) {
    use crate::model::Flow;
    // (sum of time x handshakes, handshakes) of each party.
    let mut client = (0.0, 0u64);
    let mut agent = (0.0, 0u64);
    for s in &trial.streams {
        let (client_end, agent_end) = match s.flow {
            Flow::ClientToAgent => (&s.sender, &s.receiver),
            Flow::AgentToClient => (&s.receiver, &s.sender),
        };
        for (end, into) in [(client_end, &mut client), (agent_end, &mut agent)] {
            if let Some(t) = end.extras.get::<TlsEnd>(KEY) {
                let n = t.handshakes.unwrap_or(1);
                into.0 += t.handshake_seconds * n as f64;
                into.1 += n;
            }
        }
    }
    if client.1 == 0 || agent.1 == 0 {
        return;
    }
    let total = HandshakeTotal {
        client_handshake_seconds: client.0 / client.1 as f64,
        agent_handshake_seconds: agent.0 / agent.1 as f64,
    };
    trial.sum.extras.set(SUM_KEY, &total);
}

/// The share of an end's CPU time the cipher took, above which the cipher
/// names what limited an end short of CPU.
pub const CIPHER_SHARE_PERCENT: f64 = 50.0;

/// Puts a stream end's handshake `record` in `end` under [`KEY`], with
/// this end's one-core cipher speed (of sealing when `seals`: this end's
/// direction carries the bulk; of opening otherwise).
pub fn record_handshake(end: &mut TaskEnd, mut record: TlsEnd, seals: bool) {
    record.cipher_one_core_bits_per_second = one_core_speed(&record.cipher_suite, seals);
    end.extras.set(KEY, &record);
}

/// This host's one-core speed of `suite` for a sender (`encrypt`) or a receiver.
pub fn one_core_speed(suite: &str, encrypt: bool) -> Option<f64> {
    let cipher = cipher_of_suite(suite)?;
    crate::probe::cipher::speeds()
        .into_iter()
        .find(|s| s.cipher == cipher.name())
        .map(|s| match encrypt {
            true => s.encrypt_bits_per_second,
            false => s.decrypt_bits_per_second,
        })
}

/// What the cipher cost each end of a TLS trial: per end and role, the
/// plaintext it sealed or opened, the time one core of it needs for that,
/// and that time's share of the end's CPU time.
#[derive(Debug, Clone, PartialEq)]
pub struct CipherCost {
    pub party: crate::model::Party,
    /// `sender` or `receiver`.
    pub role: &'static str,
    pub cipher: String,
    pub bytes: u64,
    /// The end's one-core speed of the cipher in its direction.
    pub one_core_bits_per_second: f64,
    /// The end's rate per stream.
    pub bits_per_second_per_stream: f64,
    pub streams: usize,
    /// Cipher seconds (bytes at one-core speed) as a share of the end's
    /// own CPU seconds (its process, user and system).
    pub share_of_cpu_percent: f64,
}

/// The cipher cost of each end of `trial` that sealed or opened TLS
/// records and knew its cipher speed.
pub fn cipher_costs(trial: &crate::model::TrialResult) -> Vec<CipherCost> {
    use crate::model::Party;
    let mut costs = Vec::new();
    for party in [Party::Client, Party::Agent] {
        for role in ["sender", "receiver"] {
            let ends: Vec<(&crate::model::StreamEnd, TlsEnd)> = trial
                .streams
                .iter()
                .filter_map(|s| {
                    let (end, holder) = match role {
                        "sender" => (&s.sender, s.flow.sender()),
                        _ => (&s.receiver, s.flow.receiver()),
                    };
                    (holder == party).then_some(())?;
                    Some((end, end.extras.get::<TlsEnd>(KEY)?))
                })
                .collect();
            let Some(speed) = ends.iter().find_map(|(_, t)| t.cipher_one_core_bits_per_second) else {
                continue;
            };
            let bytes: u64 = ends.iter().map(|(e, _)| e.bytes).sum();
            let rate: f64 = ends.iter().map(|(e, _)| e.bits_per_second).sum();
            let cpu = match party {
                Party::Client => &trial.cpu.client,
                Party::Agent => &trial.cpu.agent,
            };
            let own = cpu.process.user_seconds + cpu.process.system_seconds;
            let cipher_seconds = bytes as f64 * 8.0 / speed.max(1.0);
            costs.push(CipherCost {
                party,
                role,
                cipher: ends[0].1.cipher_suite.clone(),
                bytes,
                one_core_bits_per_second: speed,
                bits_per_second_per_stream: rate / ends.len() as f64,
                streams: ends.len(),
                share_of_cpu_percent: if own > 0.0 { cipher_seconds * 100.0 / own } else { 0.0 },
            });
        }
    }
    costs
}

/// The verdict's finding where the cipher took most of an end's CPU time:
/// `cipher_bound` on that end. The verdict lets it name the end only when
/// that end was short of CPU (busy, starved or throttled); otherwise the
/// cipher, however costly, did not limit the figure.
pub fn cipher_findings(trial: &crate::model::TrialResult) -> Vec<crate::model::Verdict> {
    cipher_costs(trial)
        .into_iter()
        .filter(|c| c.share_of_cpu_percent >= CIPHER_SHARE_PERCENT)
        .map(|c| {
            let cipher = cipher_of_suite(&c.cipher).map_or(c.cipher.clone(), |x| x.to_string());
            let verb = if c.role == "sender" { "sealing" } else { "opening" };
            crate::model::Verdict::on_side(
                "cipher_bound",
                c.role,
                format!(
                    "the cipher on the {}: {cipher} {verb} took {:.0}% of its CPU time \
                     ({} per stream against {} on one core, {:.0}% of the cipher's speed)",
                    c.role,
                    c.share_of_cpu_percent.min(100.0),
                    crate::units::Rate(c.bits_per_second_per_stream),
                    crate::units::Rate(c.one_core_bits_per_second),
                    c.bits_per_second_per_stream * 100.0 / c.one_core_bits_per_second
                ),
            )
        })
        .collect()
}

/// The short name `--cipher` takes of a rustls suite name
/// (`TLS13_AES_128_GCM_SHA256` -> `aes128-gcm`), for speeds and labels.
pub fn cipher_of_suite(suite: &str) -> Option<Cipher> {
    Cipher::ALL.into_iter().find(|c| c.suite_name() == suite)
}

/// The TLS lines under a result: what the handshakes settled on and what
/// the cipher cost each end.
///
/// ```text
/// TLS: TLSv1_3 TLS13_AES_128_GCM_SHA256 (rustls), handshake 1.9 ms (client, mean of 1); agent certificate sha256:3f:a1:...:9c, trusted as announced by the agent (--tls-pin to require it)
/// TLS cipher, client sender: aes128-gcm sealing 9.12 Gbit/s per stream, 61% of one core's 14.9 Gbit/s; 78% of its CPU time
/// ```
pub fn write_details(trial: &crate::model::TrialResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    write_handshakes(trial, out)?;
    for c in cipher_costs(trial) {
        let cipher = cipher_of_suite(&c.cipher).map_or(c.cipher.clone(), |x| x.to_string());
        let verb = if c.role == "sender" { "sealing" } else { "opening" };
        writeln!(
            out,
            "TLS cipher, {} {}: {cipher} {verb} {} per stream, {:.0}% of one core's {}; {:.0}% of its CPU time",
            c.party.as_str(),
            c.role,
            crate::units::Rate(c.bits_per_second_per_stream),
            c.bits_per_second_per_stream * 100.0 / c.one_core_bits_per_second,
            crate::units::Rate(c.one_core_bits_per_second),
            c.share_of_cpu_percent.min(100.0)
        )?;
    }
    Ok(())
}

/// The TLS line of what the client's handshakes settled on, their mean
/// time and count (one per stream, or one per transaction with `rr --crr`),
/// and how the client trusted the agent's certificate.
pub fn write_handshakes(trial: &crate::model::TrialResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use crate::model::Party;
    let client_ends: Vec<TlsEnd> = trial
        .streams
        .iter()
        .flat_map(|s| {
            [(&s.sender, s.flow.sender()), (&s.receiver, s.flow.receiver())]
                .into_iter()
                .filter(|(_, p)| *p == Party::Client)
                .filter_map(|(e, _)| e.extras.get::<TlsEnd>(KEY))
        })
        .collect();
    let Some(first) = client_ends.first() else {
        return Ok(());
    };
    // Each end's mean weighed by its handshakes (one, or rr --crr's many).
    let weight = |t: &TlsEnd| t.handshakes.unwrap_or(1) as f64;
    let count: f64 = client_ends.iter().map(weight).sum();
    let mean = client_ends.iter().map(|t| t.handshake_seconds * weight(t)).sum::<f64>() / count.max(1.0);
    let trust = match first.trust.as_deref() {
        Some("pinned") => "pinned (--tls-pin)".to_string(),
        Some("ca") => "signed by a CA of --tls-ca".to_string(),
        _ => "trusted as announced by the agent (--tls-pin to require it)".to_string(),
    };
    writeln!(
        out,
        "TLS: {} {} ({}), handshake {:.2} ms (client, mean of {count}); agent certificate sha256:{}, {trust}",
        first.version,
        first.cipher_suite,
        first.record_layer,
        mean * 1000.0,
        cert::with_colons(&first.certificate_sha256)
    )?;
    Ok(())
}
