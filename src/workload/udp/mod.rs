//! `udp`: UDP streams at an offered rate (or as fast as the sender can
//! go), one socket and one thread per stream, in either or both directions,
//! like iperf3 `-u` and netperf UDP_STREAM.
//!
//! The streams run the UDP transport's datagram loops
//! ([`super::transport::udp::loops`]: paced batches, GSO/GRO, counts,
//! jitter, drops). Loss is computed when the client merges both reports:
//! the sender's own count travels over the control connection, so a lost
//! last datagram never hides loss.

pub mod args;
pub mod result;
pub mod text;

use std::time::Instant;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::bulk::{not_a_setting_of, BulkParams, BulkSettings};
use super::runner::{run_streams, StreamBody, StreamContext, StreamTask};
use super::transport;
use super::transport::datagram::loops::{self, ReceiveOptions, SendOptions};
use super::transport::datagram::HEADER_LEN;
use super::transport::datagram::{DatagramServing, Endpoint};
use super::transport::stream::ConnectOptions;
use super::{
    Aborter, AgentNet, AgentSide, ChartViews, ClientNet, Figures, ResultKind, RunControl, Side, SideOutcome, SpecError,
    Stored, TestSpec, TextView, VerdictQuestions, Workload, WorkloadError,
};
use super::{Better, Metric};
use crate::model::spec::out_of_range;
use crate::model::{FlowTotal, Party, Role, TrialResult, Verdict};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;
use std::io::{self, Write};

/// Parameters of the `udp` workload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpParams {
    /// Offered rate per stream; None sends as fast as the sender can.
    #[serde(default)]
    pub rate_bits_per_second: Option<u64>,
    /// UDP GSO (UDP_SEGMENT) on the sending sockets.
    #[serde(default)]
    pub gso: bool,
    /// UDP GRO on the receiving sockets.
    #[serde(default)]
    pub gro: bool,
}

/// The `udp` workload.
pub struct UdpStream;

/// Datagrams per direction in a count run (`-n`, `-k`): the byte count
/// over the datagram size, rounded up (as iperf3 sends ⌈n / -l⌉).
fn datagrams_per_direction(spec: &TestSpec) -> Option<u64> {
    Some(spec.bytes?.div_ceil(spec.message_bytes.max(1)))
}

/// The datagrams stream `id` sends in a count run: its direction's count
/// shared out among the direction's streams, the first ones taking the
/// remainder (as `tcp -n` shares bytes). Both ends compute it from the
/// spec, so the receiver knows when it has everything.
pub fn datagram_quota(spec: &TestSpec, id: u32) -> Option<u64> {
    let total = datagrams_per_direction(spec)?;
    let flows = spec.flows();
    let sender = flows.iter().find(|(f, _)| *f == id)?.1.sender();
    let ids: Vec<u32> = flows
        .iter()
        .filter(|(_, f)| f.sender() == sender)
        .map(|(f, _)| *f)
        .collect();
    let (n, index) = (ids.len() as u64, ids.iter().position(|&f| f == id)? as u64);
    Some(total / n + u64::from(index < total % n))
}

/// How UDP results read.
pub struct UdpResults;

/// The share of datagrams lost, per direction and in sum.
const LOSS_PERCENT: Metric = Metric {
    name: "loss_percent",
    option: "loss",
    label: "UDP loss",
    unit: "%",
    pointer: "/sum/udp/loss_percent",
    divisor: 1.0,
    better: Better::Lower,
};

/// The datagrams' median one-way delay (the worse direction's in a
/// bidirectional run), the clocks' offset taken out.
const ONE_WAY_P50: Metric = Metric {
    name: "one_way_p50_seconds",
    option: "one-way",
    label: "one-way delay (median)",
    unit: "s",
    pointer: "/sum/udp/one_way/p50_seconds",
    divisor: 1.0,
    better: Better::Lower,
};

impl Figures for UdpResults {
    fn figures(&self) -> &'static [Metric] {
        const FIGURES: [Metric; 8] = [
            Metric::RECEIVER_RATE,
            Metric::SENDER_RATE,
            LOSS_PERCENT,
            ONE_WAY_P50,
            Metric::CLIENT_CPU,
            Metric::AGENT_CPU,
            Metric::CLIENT_SERVICE_DEMAND,
            Metric::AGENT_SERVICE_DEMAND,
        ];
        &FIGURES
    }

    fn loss_ratio(&self, total: &FlowTotal, _trial: &TrialResult) -> Option<f64> {
        let percent = total.extras.raw().get(result::KEY)?.get("loss_percent")?.as_f64()?;
        percent.is_finite().then_some(percent / 100.0)
    }

    fn summarize(&self, trial: &mut TrialResult) {
        result::summarize(trial)
    }
}

impl Stored for UdpResults {
    fn stored_columns(&self) -> &'static [Metric] {
        &[LOSS_PERCENT]
    }

    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let p: UdpParams = spec.params().unwrap_or_default();
        let mode = match (p.gso, p.gro) {
            (false, false) => "UDP",
            (true, false) => "UDP GSO",
            (false, true) => "UDP GRO",
            (true, true) => "UDP GSO+GRO",
        };
        let mut parts = vec![("workload", mode.to_string())];
        parts.extend(super::case::stream_parts(spec, "datagrams"));
        if let Some(rate) = p.rate_bits_per_second {
            parts.push(("rate", format!("{} per stream", super::case::rate(rate as f64))));
        }
        parts
    }
}

impl VerdictQuestions for UdpResults {
    fn findings(&self, trial: &TrialResult) -> Vec<Verdict> {
        text::findings(trial)
    }

    fn sender_reached_offer(&self, trial: &TrialResult) -> Option<bool> {
        let udp: result::UdpResult = trial.sum.extras.get(result::KEY)?;
        Some(udp.percent_of_offer()? >= result::OFFER_REACHED_PERCENT)
    }

    fn datagrams_sent(&self, trial: &TrialResult) -> Option<u64> {
        let udp: result::UdpResult = trial.sum.extras.get(result::KEY)?;
        Some(udp.sent_datagrams)
    }
}

impl TextView for UdpResults {
    fn messages_text(&self, spec: &TestSpec) -> Option<String> {
        let size = crate::units::Size(spec.message_bytes);
        Some(match datagrams_per_direction(spec) {
            Some(n) => format!("{n} datagrams of {size} per direction"),
            None => format!("{size} datagrams"),
        })
    }

    fn default_buffers_note(&self) -> Option<String> {
        Some(format!(
            "send: kernel default; receive: {} asked, which Linux doubles, up to net.core.rmem_max",
            crate::units::Size(loops::DEFAULT_RECEIVE_BUFFER as u64)
        ))
    }

    fn write_summary(&self, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
        text::write_summary(trial, out)
    }
}

impl ChartViews for UdpResults {}

/// The udp workload's [`BulkSettings`]: the rate, GSO and GRO.
struct UdpBulk;

impl BulkParams for UdpBulk {
    fn settings(&self, spec: &TestSpec) -> Result<BulkSettings, SpecError> {
        let p: UdpParams = spec.params()?;
        Ok(BulkSettings {
            rate_bits_per_second: p.rate_bits_per_second,
            gso: p.gso,
            gro: p.gro,
            ..BulkSettings::default()
        })
    }

    fn set(&self, spec: &mut TestSpec, settings: &BulkSettings) -> Result<(), SpecError> {
        let own = BulkSettings {
            rate_bits_per_second: settings.rate_bits_per_second,
            gso: settings.gso,
            gro: settings.gro,
            ..BulkSettings::default()
        };
        if own != *settings {
            return Err(not_a_setting_of(
                "udp",
                "MSS, NODELAY, congestion control, discard or zero-copy",
            ));
        }
        spec.set_params(&UdpParams {
            rate_bits_per_second: settings.rate_bits_per_second,
            gso: settings.gso,
            gro: settings.gro,
        })
    }
}

impl Workload for UdpStream {
    fn results(&self) -> &'static dyn ResultKind {
        &UdpResults
    }

    fn name(&self) -> &'static str {
        "udp"
    }

    fn bulk(&self) -> Option<&'static dyn BulkParams> {
        Some(&UdpBulk)
    }

    fn offered_rate(&self, spec: &TestSpec) -> OfferedRate {
        // `-b max` (no rate) and parameters that do not parse send unpaced.
        match spec.params::<UdpParams>() {
            Ok(UdpParams {
                rate_bits_per_second: Some(rate),
                ..
            }) if rate > 0 => OfferedRate::PerStream(rate as f64),
            _ => OfferedRate::Unlimited,
        }
    }

    fn peer_tests(&self) -> bool {
        true
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::UdpOptions> = super::args::ArgsOf::new(super::args::length_option);
        &LINE
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let params: UdpParams = spec.params()?;
        transport::datagrams().check_message_size("-l/--length", spec.message_bytes, HEADER_LEN as u64)?;
        if params.rate_bits_per_second == Some(0) {
            return Err(out_of_range("-b/--bitrate", "a rate above 0 (e.g. 100M) or 'max'", 0));
        }
        if let Some(datagrams) = datagrams_per_direction(spec) {
            if datagrams < u64::from(spec.streams) {
                return Err(out_of_range(
                    "-n/--bytes or -k/--blocks",
                    format!(
                        "at least one datagram for each of the {} streams ({} B with -l {})",
                        spec.streams,
                        u64::from(spec.streams) * spec.message_bytes,
                        spec.message_bytes
                    ),
                    format!("{datagrams} datagrams"),
                ));
            }
        }
        Ok(())
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: UdpParams = spec.params()?;
        let options = ConnectOptions::new(&spec.agent, &|_| Ok(()), None);
        let serving = transport::datagrams().serve_datagrams(net, &flow_ids(spec), &options)?;
        Ok(Box::new(UdpAgent {
            serving,
            spec: spec.clone(),
            params,
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: UdpParams = spec.params()?;
        let options = ConnectOptions::new(&spec.client, &|_| Ok(()), None);
        let endpoints = transport::datagrams().dial_datagrams(net, &flow_ids(spec), &options)?;
        UdpSide::new(Party::Client, spec, params, endpoints).map(|s| Box::new(s) as Box<dyn Side>)
    }
}

/// The ids of a test's streams, in the order the ports go.
fn flow_ids(spec: &TestSpec) -> Vec<u32> {
    spec.flows().iter().map(|(id, _)| *id).collect()
}

struct UdpAgent {
    serving: Box<dyn DatagramServing>,
    spec: TestSpec,
    params: UdpParams,
}

impl AgentSide for UdpAgent {
    fn data_ports(&self) -> Vec<u16> {
        self.serving.ports()
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        let endpoints = self.serving.accept(deadline)?;
        UdpSide::new(Party::Agent, &self.spec, self.params, endpoints).map(|s| Box::new(s) as Box<dyn Side>)
    }
}

/// One stream end: its socket, role, and what registration refused.
struct UdpEndpoint {
    id: u32,
    role: Role,
    socket: Socket,
    refused: u64,
}

/// One end's streams, registered.
struct UdpSide {
    spec: TestSpec,
    params: UdpParams,
    ends: Vec<UdpEndpoint>,
}

impl UdpSide {
    fn new(
        host: Party,
        spec: &TestSpec,
        params: UdpParams,
        endpoints: Vec<Endpoint>,
    ) -> Result<UdpSide, WorkloadError> {
        let flows = spec.flows();
        let mut ends = Vec::with_capacity(endpoints.len());
        for Endpoint { id, socket, refused } in endpoints {
            let Some((_, flow)) = flows.iter().find(|(f, _)| *f == id) else {
                continue;
            };
            let role = if flow.sender() == host {
                Role::Sender
            } else {
                Role::Receiver
            };
            let side = match host {
                Party::Client => &spec.client,
                Party::Agent => &spec.agent,
            };
            let dg = spec.message_bytes as usize;
            loops::prepare_end(
                &socket,
                role,
                dg,
                (params.gso, params.gro),
                side.receive_buffer_bytes.is_some(),
            )?;
            ends.push(UdpEndpoint {
                id,
                role,
                socket,
                refused,
            });
        }
        Ok(UdpSide {
            spec: spec.clone(),
            params,
            ends,
        })
    }
}

impl Side for UdpSide {
    fn aborter(&self) -> Aborter {
        super::transport::admission::aborter(&self.ends.iter().map(|e| &e.socket).collect::<Vec<_>>())
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let dg = self.spec.message_bytes as usize;
        let rate = self.params.rate_bits_per_second;
        let mut tasks = Vec::new();
        for end in self.ends {
            let buffers = tcpinfo::socket_buffers(&end.socket);
            let (id, socket) = (end.id, end.socket);
            let quota = datagram_quota(&self.spec, id);
            let body: StreamBody = match end.role {
                Role::Sender => {
                    let how = SendOptions {
                        id,
                        datagram_bytes: dg,
                        rate_bits_per_second: rate,
                        gso: self.params.gso,
                        quota,
                        start: control.start,
                        warmup_until: control.start + control.omit,
                        wire: loops::Wire::Nicbench,
                    };
                    Box::new(move |ctx: &StreamContext| loops::send_stream(&socket, &how, ctx))
                }
                Role::Receiver => {
                    let how = ReceiveOptions {
                        id,
                        datagram_bytes: dg,
                        gro: self.params.gro,
                        refused: end.refused,
                        expected: quota.map(|datagrams| loops::Expected::new(datagrams, dg, rate)),
                        first_within: None,
                        wire: loops::Wire::Nicbench,
                        warmup_until: None,
                    };
                    Box::new(move |ctx: &StreamContext| loops::receive_stream(&socket, &how, ctx))
                }
            };
            tasks.push(StreamTask::new(id, end.role, buffers, body));
        }
        run_streams(tasks, control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;

    #[test]
    fn sizes_rates_and_byte_counts_are_checked() {
        let mut s = spec("udp");
        s.message_bytes = 65_508;
        assert!(UdpStream.validate(&s).unwrap_err().to_string().contains("65507"));
        s.message_bytes = 1400;
        s.params = serde_json::json!({"rate_bits_per_second": 0});
        assert!(UdpStream.validate(&s).unwrap_err().to_string().contains("-b/--bitrate"));
        s.params = serde_json::Value::Null;
        // A count run: 1000 B is one datagram of 1400 B, enough for one stream.
        s.bytes = Some(1000);
        assert!(UdpStream.validate(&s).is_ok());
        s.streams = 2;
        let e = UdpStream.validate(&s).unwrap_err().to_string();
        assert!(
            e.contains("at least one datagram for each of the 2 streams (2800 B with -l 1400), got 1 datagrams"),
            "{e}"
        );
        s.bytes = None;
        assert!(UdpStream.validate(&s).is_ok());
    }

    #[test]
    fn a_count_is_shared_out_among_each_directions_streams() {
        let mut s = spec("udp");
        s.message_bytes = 1400;
        s.streams = 3;
        s.direction = crate::model::Direction::Bidir;
        assert_eq!(datagram_quota(&s, 1), None, "a timed run has no quota");
        // 10 datagrams and one byte: 11 datagrams per direction, 4 + 4 + 3.
        s.bytes = Some(14_001);
        let flows = s.flows();
        for sender in [Party::Client, Party::Agent] {
            let quotas: Vec<u64> = flows
                .iter()
                .filter(|(_, f)| f.sender() == sender)
                .map(|(id, _)| datagram_quota(&s, *id).unwrap())
                .collect();
            assert_eq!(quotas, [4, 4, 3], "{sender:?}");
        }
        assert_eq!(datagram_quota(&s, 99), None, "no such stream");
    }
}
