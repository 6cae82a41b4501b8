//! Options shared by every measuring command, and each measuring command:
//! the shared options with the workload's own (from its folder).

use std::time::Duration;

use clap::{ArgMatches, Args, FromArgMatches, Subcommand};

use super::parse;
use crate::workload::args::{Around, SpecArgs};
use crate::workload::{SpecError, Workload};

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
    #[arg(short, long, env = "NICBENCH_PORT", hide_env = true, value_parser = crate::cli::parse::port_to_connect)]
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
    /// What goes into the test's spec: time, streams, direction, buffers, pinning.
    #[command(flatten)]
    pub spec: SpecArgs,
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
    #[arg(long, value_name = "BYTES", value_parser = parse::between::<u64>(0, 65535))]
    pub link_overhead: Option<u64>,
    /// How long to wait for the agent to accept the control connection.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse::positive_duration)]
    pub connect_timeout: Duration,
    /// When the agent is busy, wait in its queue up to this long for a turn
    /// instead of failing (e.g. 60s; at most 1h).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse::queue_wait)]
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
    #[arg(long, value_name = "LOCAL=REMOTE,...|auto", value_parser = crate::multilink::parse_links)]
    pub links: Option<crate::multilink::LinksArg>,
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

/// A measuring command: one subcommand per registered workload, built
/// from the workload's declaration ([`CommandLine::command`]) with the
/// shared [`MeasureArgs`] on it. `nicbench tcp`, `nicbench sweep`, ... all
/// parse into this; the workload's own options stay in `matches`, which
/// its registry entry turns into the spec and its [`Around`].
///
/// [`CommandLine::command`]: crate::workload::args::CommandLine::command
/// [`Around`]: crate::workload::args::Around
#[derive(Debug, Clone)]
pub struct Measurement {
    /// The workload's name, which is the subcommand's.
    pub workload: &'static str,
    pub measure: MeasureArgs,
    /// The subcommand's matches: the shared options and the workload's own.
    pub matches: ArgMatches,
}

impl Measurement {
    fn entry(name: &str) -> Option<&'static dyn Workload> {
        crate::workload::find(name).ok().filter(|w| w.measuring_command())
    }

    /// The registered workload.
    pub fn of(&self) -> &'static dyn Workload {
        Measurement::entry(self.workload).expect("parsed from a registered workload")
    }

    /// The test spec this command line asks for.
    pub fn spec(&self) -> Result<crate::model::TestSpec, SpecError> {
        self.of().command_line().spec(&self.matches)
    }

    /// The workload's part of the command around the run.
    pub fn around(&self) -> Result<Box<dyn Around>, SpecError> {
        self.of().command_line().around(&self.matches)
    }
}

impl FromArgMatches for Measurement {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let missing = || clap::Error::raw(clap::error::ErrorKind::MissingSubcommand, "no measuring command given");
        let (name, sub) = matches.subcommand().ok_or_else(missing)?;
        let workload = Measurement::entry(name).ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::InvalidSubcommand,
                format!("'{name}' is not a measuring command"),
            )
        })?;
        Ok(Measurement {
            workload: workload.name(),
            measure: MeasureArgs::from_arg_matches(sub)?,
            matches: sub.clone(),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Measurement::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for Measurement {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        let measuring = crate::workload::REGISTRY.iter().filter(|w| w.measuring_command());
        measuring.fold(command, |command, w| {
            let sub = MeasureArgs::augment_args(clap::Command::new(w.name()));
            command.subcommand(w.command_line().command(sub))
        })
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        Measurement::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        Measurement::entry(name).is_some()
    }
}
