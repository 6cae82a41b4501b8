//! Options shared by every measuring command, and those of `tcp`.

use std::time::Duration;

use clap::Args;

use super::parse;

/// Where the agent is, how long to run, which way, and output format.
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// Host name or address of the agent (`nicbench serve` must run there),
    /// optionally with its port: HOST, HOST:PORT, [IPv6]:PORT; or
    /// `iperf3://HOST[:PORT]` for an iperf3 server (see --iperf3).
    #[arg(value_name = "HOST")]
    pub host: String,
    /// The peer is an iperf3 3.x server (`iperf3 -s`), not a nicbench
    /// agent; its port is 5201 unless -p or iperf3://HOST:PORT says otherwise.
    #[arg(long)]
    pub iperf3: bool,
    /// Agent control port [default: 5310, or $NICBENCH_PORT, which `nicbench
    /// lab exec` sets to the lab's agent port].
    #[arg(short, long, env = "NICBENCH_PORT", hide_env = true)]
    pub port: Option<u16>,
    /// Use IPv4 only.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Local address, or interface name whose address to use, for the control
    /// and data sockets (selects the path).
    #[arg(short = 'B', long, value_name = "ADDR|IFACE")]
    pub bind: Option<String>,
    /// How long to send, after the warm-up.
    #[arg(short = 't', long = "time", value_name = "DURATION", default_value = "10s",
          value_parser = parse::positive_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Warm-up at the start that is excluded from the result.
    #[arg(short = 'O', long, value_name = "DURATION", default_value = "0s", value_parser = parse::duration,
          allow_hyphen_values = true)]
    pub omit: Duration,
    /// Print a line per interval while the test runs (recorded in JSON at
    /// this interval too; 1 s when not given).
    #[arg(short = 'i', long, value_name = "DURATION", value_parser = parse::positive_duration)]
    pub interval: Option<Duration>,
    /// Parallel streams (one thread and one connection each).
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1,
          value_parser = parse::between::<u32>(1, crate::model::spec::MAX_STREAMS as u64))]
    pub streams: u32,
    /// Agent sends, client receives.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once (N streams each way).
    #[arg(long)]
    pub bidir: bool,
    /// Socket send and receive buffer on both ends (SO_SNDBUF/SO_RCVBUF).
    #[arg(short = 'w', long = "window", value_name = "SIZE", value_parser = parse::positive_size)]
    pub window: Option<u64>,
    /// Local send buffer (like netperf -s); overrides -w.
    #[arg(long, value_name = "SIZE", value_parser = parse::positive_size)]
    pub sndbuf: Option<u64>,
    /// Local receive buffer; overrides -w. Unset, a UDP receiver asks for 4 MiB.
    #[arg(long, value_name = "SIZE", value_parser = parse::positive_size)]
    pub rcvbuf: Option<u64>,
    /// Agent's send buffer (like netperf -S); overrides -w.
    #[arg(long, value_name = "SIZE", value_parser = parse::positive_size)]
    pub remote_sndbuf: Option<u64>,
    /// Agent's receive buffer; overrides -w. Unset, a UDP receiver asks for 4 MiB.
    #[arg(long, value_name = "SIZE", value_parser = parse::positive_size)]
    pub remote_rcvbuf: Option<u64>,
    /// Pin local stream threads to these cores, round-robin (e.g. 0 or 0-3).
    #[arg(short = 'A', long = "affinity", value_name = "CORES", value_parser = parse::cpu_list)]
    pub affinity: Option<parse::CpuList>,
    /// Pin the agent's stream threads to these of its cores.
    #[arg(long = "remote-affinity", value_name = "CORES", value_parser = parse::cpu_list)]
    pub remote_affinity: Option<parse::CpuList>,
    /// Print the result as one JSON document (schema in docs/SCHEMA.md).
    #[arg(long, conflicts_with = "json_stream")]
    pub json: bool,
    /// Print interval samples and then the result as JSON lines.
    #[arg(long)]
    pub json_stream: bool,
    /// Link speed for the percent of theoretical goodput and the verdict
    /// (e.g. 1G, 10G, 100M); default: the slower end's NIC link speed.
    #[arg(long, value_name = "RATE", value_parser = super::linerate::link_rate)]
    pub link_speed: Option<u64>,
    /// Bytes each packet costs against the link speed besides the IP packet,
    /// for the percent of theoretical goodput (e.g. 14 for a tbf shaper
    /// elsewhere on the path, which counts the Ethernet header only);
    /// default: 38 on a physical wire (--link-speed, a NIC's speed), or what
    /// a tbf on an end's interface counts.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(0..=65535))]
    pub link_overhead: Option<u64>,
    /// How long to wait for the agent to accept the control connection.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse::positive_duration)]
    pub connect_timeout: Duration,
    /// When the agent is busy, wait in its queue up to this long for a turn
    /// instead of failing (e.g. 60s; at most 1h).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse::duration)]
    pub wait: Duration,
    /// Pre-shared key file, for an agent started with --psk-file.
    #[arg(long, value_name = "FILE", env = "NICBENCH_PSK_FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// User name for an iperf3 server that requires RSA authentication
    /// (iperf3's --username); the password is taken from $IPERF3_PASSWORD.
    #[arg(long, value_name = "USER", requires = "iperf3_rsa_public_key")]
    pub iperf3_username: Option<String>,
    /// The iperf3 server's RSA public key in PEM (iperf3's
    /// --rsa-public-key-path), for --iperf3-username.
    #[arg(long, value_name = "FILE", requires = "iperf3_username")]
    pub iperf3_rsa_public_key: Option<std::path::PathBuf>,
    /// Encrypt the credentials with PKCS#1 v1.5 padding instead of OAEP:
    /// for iperf3 servers before 3.17 (Debian 12's 3.12), or newer ones
    /// started with --use-pkcs1-padding.
    #[arg(long, requires = "iperf3_username")]
    pub iperf3_use_pkcs1_padding: bool,
    /// Run N trials and report the one chosen by --pick (the median unless
    /// told otherwise), with min/median/max.
    #[arg(long, value_name = "N", default_value_t = 1, conflicts_with_all = ["confidence", "iterations"],
          value_parser = parse::between::<u32>(1, 1000))]
    pub repeat: u32,
    /// Which of the --repeat trials to report. The median is the default:
    /// the best of N favours whichever configuration varies more, so it
    /// biases A/B comparisons.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = PickArg::Median,
          requires = "repeat")]
    pub pick: PickArg,
    /// Repeat trials until the LEVEL% confidence interval of the mean
    /// throughput is at most WIDTH% of the mean wide (netperf -I; e.g. 99,5).
    #[arg(long, value_name = "LEVEL,WIDTH", value_parser = parse::confidence)]
    pub confidence: Option<(f64, f64)>,
    /// With --confidence: at most MAX and at least MIN trials (netperf -i;
    /// default 10,3).
    #[arg(long, value_name = "MAX,MIN", value_parser = parse::iterations)]
    pub iterations: Option<(u32, u32)>,
    /// Several links at once: LOCAL=REMOTE pairs separated by commas (a
    /// local address or interface name, the agent's address or name on that
    /// link), each with its own -P streams; or `auto` to pair the agent's
    /// addresses with local ones on the same subnets (docs/LINKS.md).
    #[arg(long, value_name = "LOCAL=REMOTE,...|auto", value_parser = crate::links::parse_links)]
    pub links: Option<crate::links::LinksArg>,
    /// With --links: measure each link alone first, then all together, in
    /// one run; the scaling efficiency is then against the best link alone.
    #[arg(long, requires = "links")]
    pub scaling: bool,
    #[command(flatten)]
    pub save: super::store::SaveArgs,
}

/// `--pick`: which of the repeated trials is reported. The command line's
/// words for `stats::Pick`, which knows nothing of clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PickArg {
    /// The best trial (highest throughput).
    Best,
    /// The median trial (the lower middle one for an even count).
    Median,
    /// The mean over trials; the trial nearest the mean is shown in full.
    Mean,
}

impl From<PickArg> for crate::stats::Pick {
    fn from(pick: PickArg) -> crate::stats::Pick {
        match pick {
            PickArg::Best => crate::stats::Pick::Best,
            PickArg::Median => crate::stats::Pick::Median,
            PickArg::Mean => crate::stats::Pick::Mean,
        }
    }
}

/// `nicbench tcp`
#[derive(Debug, Clone, Args)]
pub struct TcpArgs {
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Bytes per write and read (the default, 256K, measured faster than
    /// 64K, 128K, 512K and 1M on loopback: docs/BENCHMARKS.md).
    #[arg(short = 'l', long = "length", value_name = "SIZE", default_value = "256K", value_parser = parse::positive_size)]
    pub length: u64,
    /// Send this many bytes per direction instead of running for a time.
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = parse::positive_size, conflicts_with = "duration")]
    pub bytes: Option<u64>,
    /// TCP maximum segment size to request (TCP_MAXSEG).
    #[arg(short = 'M', long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm (TCP_NODELAY).
    #[arg(short = 'N', long)]
    pub nodelay: bool,
    /// Congestion control algorithm (see /proc/sys/net/ipv4/tcp_available_congestion_control).
    #[arg(short = 'C', long, value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Zero-copy send: sendfile(2) from a memory file instead of send(2).
    #[arg(short = 'Z', long)]
    pub zerocopy: bool,
    /// Discarding receive: recv with MSG_TRUNC, the kernel drops the data uncopied.
    #[arg(long)]
    pub discard: bool,
}
