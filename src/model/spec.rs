//! [`TestSpec`]: the description of one test, sent from client to agent and
//! validated on both ends before anything runs.

use serde::{Deserialize, Serialize};

use super::multilink::LinkPair;
use super::side::Flow;

/// Limits every test spec must respect (the agent may impose tighter ones).
pub const MAX_STREAMS: u32 = 128;
pub const MAX_MESSAGE_BYTES: u64 = 64 << 20;
pub const MAX_DURATION_SECONDS: f64 = 24.0 * 3600.0;
/// Shortest test (`-t`): the shortest interval the runner samples
/// ([`MIN_INTERVAL_SECONDS`]). A shorter test can end before its stream
/// threads are under way (issue 31: `-t 0.0000001` saved a 0 bit/s run).
pub const MIN_DURATION_SECONDS: f64 = MIN_INTERVAL_SECONDS;
pub const MIN_INTERVAL_SECONDS: f64 = 0.05;
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
/// Most links of one test (`--links`).
pub const MAX_LINKS: usize = 16;

/// Which way the streams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, agent receives.
    #[default]
    Forward,
    /// Agent sends, client receives (`--reverse`).
    Reverse,
    /// Both at once, `streams` each way (`--bidir`).
    Bidir,
}

/// Socket options and CPU placement for one end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideOptions {
    /// SO_SNDBUF to request; None leaves the kernel's autotuning alone.
    #[serde(default)]
    pub send_buffer_bytes: Option<u64>,
    /// SO_RCVBUF to request.
    #[serde(default)]
    pub receive_buffer_bytes: Option<u64>,
    /// Cores for the stream threads, used round-robin; empty = no pinning.
    #[serde(default)]
    pub cpus: Vec<u32>,
}

/// One test, as the client asks for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    /// Registered workload name, e.g. `tcp`.
    pub workload: String,
    /// How long senders send after the warm-up (ignored when `bytes` is set).
    pub duration_seconds: f64,
    /// Send this many bytes per direction instead of running for a time.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Warm-up excluded from the result.
    #[serde(default)]
    pub omit_seconds: f64,
    /// Streams per direction.
    pub streams: u32,
    pub direction: Direction,
    /// Size of each write/read (or datagram, request, ...).
    pub message_bytes: u64,
    /// Interval of the recorded samples.
    pub interval_seconds: f64,
    #[serde(default)]
    pub client: SideOptions,
    #[serde(default)]
    pub agent: SideOptions,
    /// Workload-specific parameters, checked by the workload.
    #[serde(default)]
    pub params: serde_json::Value,
    /// Several links at once (`--links`): the streams of each direction
    /// are dealt out over these client/agent address pairs in turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkPair>,
}

/// A spec that cannot run, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown workload '{name}'; this build knows: {known}")]
    UnknownWorkload { name: String, known: String },
    #[error("{option} must be {allowed}, got {got}")]
    OutOfRange {
        option: &'static str,
        allowed: String,
        got: String,
    },
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn out_of_range(option: &'static str, allowed: impl Into<String>, got: impl ToString) -> SpecError {
    SpecError::OutOfRange {
        option,
        // In words ("1 to 128"), not Rust's range syntax.
        allowed: allowed.into().replace("..=", " to "),
        got: got.to_string(),
    }
}

/// What kind of address `ip` is when it names no single host (None for a
/// unicast address): unspecified (0.0.0.0/8, ::), broadcast
/// (255.255.255.255) or multicast (224.0.0.0/4, ff00::/8).
pub fn not_a_host(ip: std::net::IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        std::net::IpAddr::V4(v4) if v4.octets()[0] == 0 => Some("unspecified (0.0.0.0/8, \"this network\")"),
        std::net::IpAddr::V4(v4) if v4.is_broadcast() => Some("the broadcast address"),
        std::net::IpAddr::V4(v4) if v4.is_multicast() => Some("a multicast address (224.0.0.0/4)"),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => Some("unspecified (::)"),
        std::net::IpAddr::V6(v6) if v6.is_multicast() => Some("a multicast address (ff00::/8)"),
        _ => None,
    }
}

/// Checks link pairs: at most [`MAX_LINKS`], unicast addresses only, no
/// pair twice, no address in two pairs on the same end, one family per pair.
pub fn validate_link_pairs(links: &[LinkPair]) -> Result<(), SpecError> {
    if links.len() > MAX_LINKS {
        return Err(out_of_range("--links", format!("1..={MAX_LINKS} links"), links.len()));
    }
    for (i, link) in links.iter().enumerate() {
        for (end, ip) in [("local (client)", link.client), ("agent", link.agent)] {
            if let Some(kind) = not_a_host(ip) {
                return Err(SpecError::Invalid(format!(
                    "--links: link {}'s {end} address {ip} is {kind}, not the address of one host's interface; \
                     give unicast addresses (see `ip -brief address` on each host, or use --links auto)",
                    i + 1
                )));
            }
        }
        if link.client.is_ipv4() != link.agent.is_ipv4() {
            return Err(SpecError::Invalid(format!(
                "--links: link {} pairs {} with {}, addresses of two families; pair IPv4 with IPv4 and IPv6 with IPv6",
                i + 1,
                link.client,
                link.agent
            )));
        }
        for (j, other) in links.iter().enumerate().take(i) {
            if other == link {
                return Err(SpecError::Invalid(format!(
                    "--links: the pair {link} is given twice (links {} and {}); give each link once",
                    j + 1,
                    i + 1
                )));
            }
            if other.agent == link.agent {
                return Err(SpecError::Invalid(format!(
                    "--links: the agent address {} is in links {} and {}; each link needs its own agent address",
                    link.agent,
                    j + 1,
                    i + 1
                )));
            }
            if other.client == link.client {
                return Err(SpecError::Invalid(format!(
                    "--links: the local address {} is in links {} and {}; each link needs its own local address",
                    link.client,
                    j + 1,
                    i + 1
                )));
            }
        }
    }
    Ok(())
}

impl TestSpec {
    /// Each stream's id and direction: ids 1..=N go the forward way, and
    /// with `--bidir` ids N+1..=2N go back.
    pub fn flows(&self) -> Vec<(u32, Flow)> {
        let n = self.streams;
        match self.direction {
            Direction::Forward => (1..=n).map(|id| (id, Flow::ClientToAgent)).collect(),
            Direction::Reverse => (1..=n).map(|id| (id, Flow::AgentToClient)).collect(),
            Direction::Bidir => (1..=n)
                .map(|id| (id, Flow::ClientToAgent))
                .chain((n + 1..=2 * n).map(|id| (id, Flow::AgentToClient)))
                .collect(),
        }
    }

    /// The link stream `id` runs over (index into `links`), when the test
    /// has links: the streams of each direction are dealt out in turn.
    pub fn link_of(&self, id: u32) -> Option<usize> {
        if self.links.is_empty() || id == 0 || self.streams == 0 {
            return None;
        }
        Some(((id - 1) % self.streams) as usize % self.links.len())
    }

    /// Checks the links: at most [`MAX_LINKS`], no pair twice, no address
    /// in two pairs on the same end, one family per pair, and a whole
    /// number of streams per link.
    pub fn validate_links(&self) -> Result<(), SpecError> {
        if self.links.is_empty() {
            return Ok(());
        }
        validate_link_pairs(&self.links)?;
        if self.streams % self.links.len() as u32 != 0 {
            return Err(SpecError::Invalid(format!(
                "--links: {} streams per direction do not divide evenly over {} links",
                self.streams,
                self.links.len()
            )));
        }
        Ok(())
    }

    /// Longest time the test may take when all goes well.
    pub fn expected_seconds(&self) -> f64 {
        self.omit_seconds + self.duration_seconds
    }

    /// Checks what every workload shares.
    pub fn validate_common(&self) -> Result<(), SpecError> {
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(out_of_range(
                "-P/--parallel",
                format!("1..={MAX_STREAMS}"),
                self.streams,
            ));
        }
        if self.message_bytes == 0 || self.message_bytes > MAX_MESSAGE_BYTES {
            return Err(out_of_range(
                "-l/--length",
                format!("1 B..={} MiB", MAX_MESSAGE_BYTES >> 20),
                self.message_bytes,
            ));
        }
        let duration = self.duration_seconds;
        if !(MIN_DURATION_SECONDS..=MAX_DURATION_SECONDS).contains(&duration) {
            return Err(out_of_range(
                "-t/--time",
                format!("{MIN_DURATION_SECONDS} s to 24 h"),
                format!("{duration} s"),
            ));
        }
        let omit = self.omit_seconds;
        if !(0.0..=MAX_DURATION_SECONDS).contains(&omit) {
            return Err(out_of_range("-O/--omit", "0 s or more", format!("{omit} s")));
        }
        let interval = self.interval_seconds;
        if !(MIN_INTERVAL_SECONDS..=MAX_DURATION_SECONDS).contains(&interval) {
            return Err(out_of_range(
                "-i/--interval",
                format!("at least {MIN_INTERVAL_SECONDS} s"),
                format!("{interval} s"),
            ));
        }
        self.validate_links()?;
        if self.bytes == Some(0) {
            return Err(out_of_range("-n/--bytes", "at least 1 byte", 0));
        }
        for side in [&self.client, &self.agent] {
            for value in [side.send_buffer_bytes, side.receive_buffer_bytes]
                .into_iter()
                .flatten()
            {
                if value == 0 || value > MAX_BUFFER_BYTES {
                    return Err(out_of_range("socket buffer size", "1 B..=1 GiB", value));
                }
            }
        }
        Ok(())
    }

    /// Checks that `cpus` of this end exist here.
    pub fn validate_cpus(cpus: &[u32], option: &'static str) -> Result<(), SpecError> {
        let available = usable_cpus();
        match cpus.iter().find(|&&c| c >= available) {
            Some(c) => Err(out_of_range(
                option,
                format!("a core number below {available} on this host"),
                c,
            )),
            None => Ok(()),
        }
    }

    /// Sets the workload-specific parameters. Their keys are kept in
    /// alphabetical order, as documents have always had them.
    pub fn set_params<T: Serialize>(&mut self, params: &T) -> Result<(), SpecError> {
        let mut value = serde_json::to_value(params)
            .map_err(|e| SpecError::Invalid(format!("parameters for workload '{}': {e}", self.workload)))?;
        if let Some(map) = value.as_object_mut() {
            map.sort_keys();
        }
        self.params = value;
        Ok(())
    }

    /// Decodes the workload-specific parameters with a clear error.
    pub fn params<T: serde::de::DeserializeOwned + Default>(&self) -> Result<T, SpecError> {
        if self.params.is_null() {
            return Ok(T::default());
        }
        T::deserialize(&self.params)
            .map_err(|e| SpecError::Invalid(format!("bad parameters for workload '{}': {e}", self.workload)))
    }
}

/// CPUs this process may run on (its affinity mask). Unlike
/// `available_parallelism`, not shrunk by a cgroup CPU quota: a lab host
/// held to 3% of a core still has every core to pin on, and its facts
/// say so (the quota is `facts.cpu_limit`).
pub fn usable_cpus() -> u32 {
    // SAFETY: an all-zero cpu_set_t is a valid empty set, which
    // sched_getaffinity fills for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            return libc::CPU_COUNT(&set).max(1) as u32;
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn spec(workload: &str) -> TestSpec {
        TestSpec {
            workload: workload.into(),
            duration_seconds: 1.0,
            bytes: None,
            omit_seconds: 0.0,
            streams: 1,
            direction: Direction::Forward,
            message_bytes: 1000,
            interval_seconds: 1.0,
            client: SideOptions::default(),
            agent: SideOptions::default(),
            params: serde_json::Value::Null,
            links: Vec::new(),
        }
    }

    #[test]
    fn bidir_gives_each_direction_its_own_ids() {
        let mut s = spec("tcp");
        s.streams = 2;
        s.direction = Direction::Bidir;
        assert_eq!(
            s.flows(),
            vec![
                (1, Flow::ClientToAgent),
                (2, Flow::ClientToAgent),
                (3, Flow::AgentToClient),
                (4, Flow::AgentToClient)
            ]
        );
    }

    #[test]
    fn out_of_range_values_are_named() {
        let mut s = spec("tcp");
        s.streams = 0;
        assert!(s.validate_common().unwrap_err().to_string().contains("-P/--parallel"));
        let mut s = spec("tcp");
        s.message_bytes = 0;
        assert!(s.validate_common().unwrap_err().to_string().contains("-l/--length"));
        let mut s = spec("tcp");
        s.duration_seconds = -1.0;
        assert!(s.validate_common().unwrap_err().to_string().contains("-t/--time"));
        let mut s = spec("tcp");
        s.duration_seconds = f64::NAN;
        assert!(s.validate_common().is_err());
        let mut s = spec("tcp");
        s.client.send_buffer_bytes = Some(0);
        assert!(s.validate_common().is_err());
    }

    #[test]
    fn wrong_json_types_are_refused_with_the_field() {
        let bad = r#"{"workload":"tcp","duration_seconds":"ten","streams":1,"direction":"forward","message_bytes":1,"interval_seconds":1}"#;
        let err = serde_json::from_str::<TestSpec>(bad).unwrap_err().to_string();
        assert!(err.contains("invalid type"), "{err}");
    }

    /// Issue 67, item 8: addresses that name no single host were accepted
    /// as link addresses (and then failed the address proof).
    #[test]
    fn link_addresses_that_name_no_host_are_refused_at_validation() {
        let pair = |client: &str, agent: &str| LinkPair {
            client: client.parse().unwrap(),
            agent: agent.parse().unwrap(),
        };
        for (client, agent, kind) in [
            ("0.0.0.0", "10.0.0.2", "unspecified"),
            ("255.255.255.255", "10.0.0.2", "the broadcast address"),
            ("224.0.0.1", "10.0.0.2", "a multicast address (224.0.0.0/4)"),
            ("10.0.0.1", "239.1.2.3", "a multicast address"),
            ("::", "fd00::2", "unspecified (::)"),
            ("ff02::1", "fd00::2", "a multicast address (ff00::/8)"),
            ("::ffff:0.0.0.0", "::ffff:10.0.0.2", "unspecified"),
        ] {
            let e = validate_link_pairs(&[pair(client, agent)]).unwrap_err().to_string();
            assert!(
                e.contains(kind) && e.contains("give unicast addresses"),
                "{client} {agent}: {e}"
            );
        }
        assert!(validate_link_pairs(&[pair("10.0.0.1", "10.0.0.2"), pair("fd00::1", "fd00::2")]).is_ok());
    }
}
