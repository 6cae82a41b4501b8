//! `multicast`: one sender, a group, many receivers. The client sends to
//! the group at an offered rate (or as fast as it can); each agent of the
//! test joins the group on the interface its control connection arrived
//! on and counts what it gets: datagrams, loss, duplicates, order, jitter,
//! one-way delay and the time from its join to its first datagram. The
//! client drives every receiver at once (`session::run_fanout`) and reads
//! one udp-style trial per receiver ([`receivers`]).
//!
//! Both ends run the UDP transport's datagram loops
//! ([`super::transport::udp::loops`]), not copies: only the sockets differ
//! ([`group`]). The sender starts before the receivers join, and the
//! warm-up (`-O`, at least the join wait) covers the joins, so that a
//! receiver that joined in time counts exactly what the sender sent after
//! the warm-up, and its loss is the sender's count minus its own.
//!
//! What an agent does for a client: it joins only the one group a test's
//! spec names (checked by [`group::check`]: multicast, not a control
//! block), only on the interface of the control connection, only for a
//! client its key (when it has one) admitted, and leaves when the test
//! ends or the client goes away (the membership ends with its socket, see
//! [`group::Membership`]). It sends nothing: a receiver has no datagram to
//! send, and the offered rate is held to the agent's `--max-rate`.

pub mod args;
pub mod group;
pub mod receivers;
pub mod switch;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::runner::{run_streams, StreamBody, StreamContext, StreamTask};
use super::transport::datagram::loops::{self, ReceiveOptions, SendOptions, Wire};
use super::transport::datagram::HEADER_LEN;
use super::{
    Aborter, AgentNet, AgentSide, ChartViews, ClientNet, Figures, ResultKind, RunControl, Side, SideOutcome, SpecError,
    Stored, TestSpec, TextView, VerdictQuestions, Workload, WorkloadError,
};
use crate::model::spec::out_of_range;
use crate::model::{Direction, FlowTotal, Role, TrialResult, Verdict};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;
use crate::workload::base::runner::TaskEnd;
use crate::workload::udp::UdpResults;
use group::Group;

/// The workload's name, on the command line, in JSON and in the database.
pub const NAME: &str = "multicast";

/// The one stream of a group test: the sender's datagrams carry its id.
pub const STREAM: u32 = 1;

/// Most hops a group's datagrams may take (the TTL field's range).
pub const MAX_TTL: u32 = 255;

/// Parameters of the `multicast` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticastParams {
    /// The group the sender sends to and the receivers join.
    pub group: IpAddr,
    pub port: u16,
    /// Source-specific multicast: the one source receivers take the group from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<IpAddr>,
    /// TTL (IPv4) or hop limit (IPv6) of the sender's datagrams: 1 stays
    /// on the sender's segment, each router on the way takes one.
    pub ttl: u32,
    /// Offered rate; None sends as fast as the sender can.
    #[serde(default)]
    pub rate_bits_per_second: Option<u64>,
    /// How long a receiver waits for its first datagram after it joined
    /// before it reports that it never joined.
    pub join_wait_seconds: f64,
    /// iperf 2 on the group beside nicbench: its receivers, or its sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_iperf2: Option<WithIperf2>,
    /// The agent that sends instead of the client, as the command line
    /// named it (`--sender`); None: the client sends (or iperf 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_agent: Option<String>,
}

/// iperf 2 (2.0.10 and later, Debian's `iperf`) on a group beside nicbench.
/// (The roles' words are plain comments: as doc comments clap would print
/// each in --help and switch the whole page to its long layout; the option
/// says them.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum WithIperf2 {
    // iperf 2 receivers (`iperf -s -u -B GROUP`) count the client's
    // datagrams too: each carries iperf 2's header in front of nicbench's,
    // and the sender ends with iperf 2's closing datagrams, on which they
    // report.
    Receivers,
    // iperf 2 sends (`iperf -c GROUP -u`): the client sends nothing; the
    // agents read iperf 2's header and take its count from its sequence
    // numbers and its closing datagram.
    Sender,
}

/// What `nicbench multicast` sends when told nothing: its default group
/// and port, TTL 1, unpaced, a 1 s join wait.
impl Default for MulticastParams {
    fn default() -> Self {
        MulticastParams {
            group: args::DEFAULT_GROUP.parse().expect("a valid group"),
            port: group::DEFAULT_PORT,
            source: None,
            ttl: 1,
            rate_bits_per_second: None,
            join_wait_seconds: 1.0,
            with_iperf2: None,
            sender_agent: None,
        }
    }
}

impl MulticastParams {
    pub fn group(&self) -> Group {
        Group {
            address: self.group,
            port: self.port,
            source: self.source,
        }
    }

    /// The group as the text shows it: `239.1.2.3:5001`, with `from
    /// SOURCE` for a source-specific one.
    pub fn group_text(&self) -> String {
        let at = std::net::SocketAddr::new(self.group, self.port);
        match self.source {
            Some(source) => format!("{at} from {source}"),
            None => at.to_string(),
        }
    }

    fn join_wait(&self) -> Duration {
        Duration::from_secs_f64(self.join_wait_seconds)
    }

    /// Whether nicbench sends (the client or an agent), not iperf 2.
    pub fn nicbench_sends(&self) -> bool {
        self.with_iperf2 != Some(WithIperf2::Sender)
    }

    /// Whether the client sends (not an agent, not iperf 2).
    pub fn client_sends(&self) -> bool {
        self.nicbench_sends() && self.sender_agent.is_none()
    }

    /// The header the group's datagrams carry.
    pub fn wire(&self) -> Wire {
        match self.with_iperf2 {
            None => Wire::Nicbench,
            Some(WithIperf2::Receivers) => Wire::Iperf2InFront,
            Some(WithIperf2::Sender) => Wire::Iperf2,
        }
    }
}

/// Shortest and longest join wait (`--join-wait`).
pub const JOIN_WAIT_RANGE: (f64, f64) = (0.05, 60.0);

/// Longest name of a sending agent a spec may carry (a host name and port).
pub const MAX_AGENT_NAME_BYTES: usize = 300;

/// Checks the sending agent's name a spec carries (it came over the wire
/// to every agent, and is shown and stored): 1 to [`MAX_AGENT_NAME_BYTES`]
/// bytes of printable characters.
fn check_agent_name(name: &str) -> Result<(), SpecError> {
    if name.is_empty() || name.len() > MAX_AGENT_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(SpecError::Invalid(format!(
            "the sending agent's name {:?} is not 1 to {MAX_AGENT_NAME_BYTES} printable characters",
            name.chars().take(40).collect::<String>()
        )));
    }
    Ok(())
}

/// The `multicast` workload.
pub struct Multicast;

/// How group results read: each receiver's trial reads as a UDP stream's
/// (loss, jitter, one-way delay, CPU), with its own case words.
pub struct MulticastResults;

impl Figures for MulticastResults {
    fn figures(&self) -> &'static [super::Metric] {
        UdpResults.figures()
    }

    fn loss_ratio(&self, total: &FlowTotal, trial: &TrialResult) -> Option<f64> {
        UdpResults.loss_ratio(total, trial)
    }

    fn summarize(&self, trial: &mut TrialResult) {
        UdpResults.summarize(trial)
    }
}

impl Stored for MulticastResults {
    fn stored_columns(&self) -> &'static [super::Metric] {
        UdpResults.stored_columns()
    }

    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let Ok(p) = spec.params::<MulticastParams>() else {
            return vec![("workload", "multicast".to_string())];
        };
        let mut parts = vec![("workload", format!("multicast to {}", p.group_text()))];
        parts.push(("datagrams", crate::units::Size(spec.message_bytes).to_string()));
        parts.push((
            "rate",
            p.rate_bits_per_second
                .map_or("as fast as the sender can".into(), |r| super::case::rate(r as f64)),
        ));
        parts.push(("ttl", p.ttl.to_string()));
        parts
    }
}

impl VerdictQuestions for MulticastResults {
    fn findings(&self, trial: &TrialResult) -> Vec<Verdict> {
        UdpResults.findings(trial)
    }

    fn sender_reached_offer(&self, trial: &TrialResult) -> Option<bool> {
        UdpResults.sender_reached_offer(trial)
    }

    fn datagrams_sent(&self, trial: &TrialResult) -> Option<u64> {
        UdpResults.datagrams_sent(trial)
    }
}

impl TextView for MulticastResults {
    fn messages_text(&self, spec: &TestSpec) -> Option<String> {
        UdpResults.messages_text(spec)
    }

    fn default_buffers_note(&self) -> Option<String> {
        UdpResults.default_buffers_note()
    }

    fn write_summary(&self, trial: &TrialResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        UdpResults.write_summary(trial, out)
    }
}

impl ChartViews for MulticastResults {}

impl Workload for Multicast {
    fn name(&self) -> &'static str {
        NAME
    }

    fn results(&self) -> &'static dyn ResultKind {
        &MulticastResults
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::MulticastOptions> = super::args::ArgsOf::new(super::args::length_option);
        &LINE
    }

    fn measuring_command(&self) -> bool {
        false
    }

    fn fanout(&self) -> Option<&'static dyn super::FanoutView> {
        Some(&receivers::Receivers)
    }

    fn supports_links(&self) -> bool {
        false
    }

    /// What the sender offers into the receiver's segment: the agent holds
    /// it to its `--max-rate` like any stream it would receive.
    fn offered_rate(&self, spec: &TestSpec) -> OfferedRate {
        match spec.params::<MulticastParams>() {
            Ok(MulticastParams {
                rate_bits_per_second: Some(rate),
                ..
            }) if rate > 0 => OfferedRate::PerStream(rate as f64),
            _ => OfferedRate::Unlimited,
        }
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let p: MulticastParams = spec.params()?;
        group::check(p.group, p.source).map_err(SpecError::Invalid)?;
        let smallest = p.wire().min_datagram_bytes() as u64;
        if p.wire() == Wire::Iperf2InFront && spec.message_bytes < smallest {
            return Err(out_of_range(
                "-l/--length",
                format!(
                    "at least {smallest} bytes with --with-iperf2 receivers (iperf 2's header and flags, 24 bytes, in \
                     front of nicbench's, {HEADER_LEN})"
                ),
                format!("{} bytes", spec.message_bytes),
            ));
        }
        super::transport::datagrams().check_message_size("-l/--length", spec.message_bytes, HEADER_LEN as u64)?;
        // The sending agent's copy of the spec is reversed (it sends, as
        // an agent does on -R); the receivers' and the document's are not.
        let sending_agents_copy = spec.direction == Direction::Reverse && p.sender_agent.is_some();
        if spec.streams != 1 || !(spec.direction == Direction::Forward || sending_agents_copy) {
            return Err(SpecError::Invalid(
                "a group test has one sender and one stream: drop -P, -R and --bidir (to have an agent send, \
                 name it with --sender AGENT)"
                    .into(),
            ));
        }
        if let Some(name) = &p.sender_agent {
            check_agent_name(name)?;
            if p.with_iperf2 == Some(WithIperf2::Sender) {
                return Err(SpecError::Invalid(
                    "--sender and --with-iperf2 sender both name the group's sender: keep one".into(),
                ));
            }
        }
        if spec.bytes.is_some() {
            return Err(SpecError::Invalid(
                "a group test runs for a time (-t), not a count".into(),
            ));
        }
        if p.port == 0 {
            return Err(out_of_range("the group's port", "1..=65535", 0));
        }
        if p.ttl > MAX_TTL {
            return Err(out_of_range("--ttl", format!("0..={MAX_TTL}"), p.ttl));
        }
        if p.rate_bits_per_second == Some(0) {
            return Err(out_of_range("-b/--bitrate", "a rate above 0 (e.g. 100M) or 'max'", 0));
        }
        let (low, high) = JOIN_WAIT_RANGE;
        if !(low..=high).contains(&p.join_wait_seconds) {
            return Err(out_of_range(
                "--join-wait",
                format!("{low} s to {high} s"),
                format!("{} s", p.join_wait_seconds),
            ));
        }
        if p.nicbench_sends() && spec.omit_seconds + 1e-9 < p.join_wait_seconds {
            return Err(SpecError::Invalid(format!(
                "the warm-up (-O {} s) must cover the join wait ({} s): datagrams sent while receivers join are \
                 not counted",
                spec.omit_seconds, p.join_wait_seconds
            )));
        }
        Ok(())
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let p: MulticastParams = spec.params()?;
        if spec.direction == Direction::Reverse {
            return Ok(Box::new(Sender::toward(
                spec,
                &p,
                net.local_ip,
                "this agent",
                &spec.agent,
            )?));
        }
        let socket = group::receiver(&p.group())?;
        crate::workload::transport::admission::apply_buffers(&socket, &spec.agent)?;
        loops::prepare_end(
            &socket,
            Role::Receiver,
            spec.message_bytes as usize,
            (false, false),
            spec.agent.receive_buffer_bytes.is_some(),
        )?;
        Ok(Box::new(Receiver {
            socket,
            group: p.group(),
            local: net.local_ip,
            datagram_bytes: spec.message_bytes as usize,
            join_wait: p.join_wait(),
            wire: p.wire(),
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let p: MulticastParams = spec.params()?;
        if !p.client_sends() {
            return Ok(Box::new(Bystander));
        }
        let local = match net.bind {
            Some(bind) => bind,
            None => crate::probe::nic::local_address_toward(net.agent_ip).ok_or_else(|| {
                WorkloadError::Setup(format!("no route from this host toward the receiver {}", net.agent_ip))
            })?,
        };
        Ok(Box::new(Sender::toward(spec, &p, local, "this host", &spec.client)?))
    }
}

impl Sender {
    /// The sender of a test of `spec` (parameters `p`): a socket aimed at
    /// the group from `local`, the address of `who` (this host, or this
    /// agent: where its control connection arrived) toward the receivers.
    /// `end` is that end's options (its socket buffers).
    fn toward(
        spec: &TestSpec,
        p: &MulticastParams,
        local: IpAddr,
        who: &str,
        end: &crate::model::spec::SideOptions,
    ) -> Result<Sender, WorkloadError> {
        // An agent listening on both families sees an IPv4 client as ::ffff:a.b.c.d.
        let local = local.to_canonical();
        if local.is_ipv4() != p.group.is_ipv4() {
            return Err(WorkloadError::Setup(format!(
                "the group {} and {who}'s address toward the receivers ({local}) are of different families: \
                 reach the agents over the group's family (-4 or -6, or -B ADDR)",
                p.group
            )));
        }
        let socket = group::sender(&p.group(), local, p.ttl)?;
        crate::workload::transport::admission::apply_buffers(&socket, end)?;
        Ok(Sender {
            socket,
            port: p.port,
            datagram_bytes: spec.message_bytes as usize,
            rate: p.rate_bits_per_second,
            wire: p.wire(),
        })
    }
}

/// An agent that sends: nothing connects to it; it is ready at once. Its
/// one port is the group's, as a receiver's is.
impl AgentSide for Sender {
    fn data_ports(&self) -> Vec<u16> {
        vec![self.port]
    }

    fn accept(self: Box<Self>, _deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        Ok(self)
    }
}

/// An agent's end: a socket bound to the group's port, not yet joined.
struct Receiver {
    socket: Socket,
    group: Group,
    /// The address the control connection arrived on: the join's interface.
    local: IpAddr,
    datagram_bytes: usize,
    join_wait: Duration,
    wire: Wire,
}

impl AgentSide for Receiver {
    fn data_ports(&self) -> Vec<u16> {
        vec![self.group.port]
    }

    /// Nothing connects to a receiver: it is ready at once.
    fn accept(self: Box<Self>, _deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        Ok(self)
    }
}

impl Side for Receiver {
    fn aborter(&self) -> Aborter {
        super::transport::admission::aborter(&[&self.socket])
    }

    /// Joins as the test starts, counts until its end (or until the join
    /// wait passes with nothing), and leaves.
    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let buffers = tcpinfo::socket_buffers(&self.socket);
        let Receiver {
            socket,
            group,
            local,
            datagram_bytes,
            join_wait,
            wire,
        } = *self;
        let how = ReceiveOptions {
            id: STREAM,
            datagram_bytes,
            gro: false,
            refused: 0,
            expected: None,
            first_within: Some(join_wait),
            wire,
            warmup_until: (wire == Wire::Iperf2).then(|| control.start + control.omit),
        };
        let body: StreamBody = Box::new(move |ctx: &StreamContext| match group::join(&socket, &group, local) {
            Ok(membership) => {
                // Datagrams only in the warm-up (a switch that flooded the
                // group before any member's report, then held it back) are
                // the runner's rule: nothing measured, rate 0.
                let end = loops::receive_stream(&socket, &how, ctx);
                drop(membership);
                end
            }
            Err(e) => TaskEnd {
                error: Some(e.to_string()),
                ..TaskEnd::default()
            },
        });
        run_streams(vec![StreamTask::new(STREAM, Role::Receiver, buffers, body)], control)
    }
}

/// The sending end (the client's, or an agent's): a socket aimed at the group.
struct Sender {
    socket: Socket,
    /// The group's port.
    port: u16,
    datagram_bytes: usize,
    rate: Option<u64>,
    wire: Wire,
}

impl Side for Sender {
    fn aborter(&self) -> Aborter {
        super::transport::admission::aborter(&[&self.socket])
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let buffers = tcpinfo::socket_buffers(&self.socket);
        let how = SendOptions {
            id: STREAM,
            datagram_bytes: self.datagram_bytes,
            rate_bits_per_second: self.rate,
            gso: false,
            quota: None,
            start: control.start,
            warmup_until: control.start + control.omit,
            wire: self.wire,
        };
        let socket = self.socket;
        let body: StreamBody = Box::new(move |ctx: &StreamContext| loops::send_stream(&socket, &how, ctx));
        run_streams(vec![StreamTask::new(STREAM, Role::Sender, buffers, body)], control)
    }
}

/// The client's end when iperf 2 sends: it sends nothing and counts
/// nothing; the run's time is the receivers'.
struct Bystander;

impl Side for Bystander {
    fn aborter(&self) -> Aborter {
        super::transport::admission::aborter(&[])
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let body: StreamBody = Box::new(|ctx: &StreamContext| {
            while !ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut end = TaskEnd::default();
            end.extras.set(
                crate::workload::udp::result::KEY,
                &crate::workload::udp::result::UdpEnd::default(),
            );
            end
        });
        let buffers = Default::default();
        run_streams(vec![StreamTask::new(STREAM, Role::Sender, buffers, body)], control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;

    fn multicast_spec() -> TestSpec {
        let mut s = spec(NAME);
        s.message_bytes = 1400;
        s.omit_seconds = 1.0;
        s.params = serde_json::json!({
            "group": "239.1.2.3", "port": 5001, "ttl": 1,
            "rate_bits_per_second": 1_000_000, "join_wait_seconds": 1.0
        });
        s
    }

    #[test]
    fn a_group_test_is_one_forward_stream_for_a_time_with_its_joins_in_the_warm_up() {
        let good = multicast_spec();
        assert!(Multicast.validate(&good).is_ok(), "{:?}", Multicast.validate(&good));
        let words = |edit: &dyn Fn(&mut TestSpec)| {
            let mut s = multicast_spec();
            edit(&mut s);
            Multicast.validate(&s).unwrap_err().to_string()
        };
        assert!(words(&|s| s.streams = 2).contains("drop -P"));
        assert!(words(&|s| s.direction = Direction::Reverse).contains("one sender"));
        assert!(words(&|s| s.bytes = Some(10)).contains("not a count"));
        assert!(words(&|s| s.omit_seconds = 0.5).contains("must cover the join wait"));
        assert!(words(&|s| s.params["group"] = "10.0.0.1".into()).contains("not a multicast group"));
        assert!(words(&|s| s.params["ttl"] = 256.into()).contains("--ttl"));
        assert!(words(&|s| s.params["port"] = 0.into()).contains("port"));
        assert!(words(&|s| s.params["join_wait_seconds"] = 0.0.into()).contains("--join-wait"));
        assert!(words(&|s| s.params["rate_bits_per_second"] = 0.into()).contains("-b/--bitrate"));
        assert!(words(&|s| {
            s.params["with_iperf2"] = "receivers".into();
            s.message_bytes = 51;
        })
        .contains("at least 52 bytes with --with-iperf2 receivers"));
        // iperf 2 sends: no warm-up needed for a join wait, any -l.
        let mut listening = multicast_spec();
        listening.params["with_iperf2"] = "sender".into();
        listening.omit_seconds = 0.0;
        listening.message_bytes = 28;
        assert!(
            Multicast.validate(&listening).is_ok(),
            "{:?}",
            Multicast.validate(&listening)
        );
        assert!(words(&|s| s.params["with_iperf2"] = "both".into()).contains("unknown variant"));
        // An agent sends: its copy of the test is reversed, nobody else's.
        let mut by_agent = multicast_spec();
        by_agent.params["sender_agent"] = "h2:5310".into();
        assert!(Multicast.validate(&by_agent).is_ok());
        by_agent.direction = Direction::Reverse;
        assert!(
            Multicast.validate(&by_agent).is_ok(),
            "{:?}",
            Multicast.validate(&by_agent)
        );
        assert!(words(&|s| {
            s.params["sender_agent"] = "h2".into();
            s.params["with_iperf2"] = "sender".into();
        })
        .contains("keep one"));
        for bad in ["", "h2\n--psk", &"h".repeat(MAX_AGENT_NAME_BYTES + 1)] {
            assert!(
                words(&|s| s.params["sender_agent"] = bad.into()).contains("printable characters"),
                "{bad:?}"
            );
        }
        assert!(words(&|s| s.params["group"] = "232.1.1.1".into()).contains("--source"));
        assert!(
            words(&|s| s.params["extra"] = 1.into()).contains("extra"),
            "unknown fields are refused"
        );
        assert_eq!(Multicast.offered_rate(&good), OfferedRate::PerStream(1e6));
    }
}
