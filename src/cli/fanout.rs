//! The fan-out commands: one per registered workload that drives several
//! agents at once with one local side (`nicbench multicast`), each built
//! from the workload's declaration with the shared [`FanoutArgs`] on it,
//! as the measuring commands are ([`super::measure`]).

use std::time::Duration;

use clap::{ArgMatches, Args, FromArgMatches, Subcommand};

use super::parse;
use crate::workload::args::SpecArgs;
use crate::workload::Workload;

/// Which agents, how to reach them, and the output.
#[derive(Debug, Clone, Args)]
pub struct FanoutArgs {
    /// The agents (each runs `nicbench serve`): HOST, HOST:PORT or
    /// [IPv6]:PORT, each named once.
    #[arg(value_name = "AGENT", required = true)]
    pub agents: Vec<String>,
    /// An agent that sends instead of this host (HOST, HOST:PORT), from its
    /// own address toward the others; it is not one of the AGENTs. This
    /// host then only drives the test.
    #[arg(long, value_name = "AGENT")]
    pub sender: Option<String>,
    /// Control port of agents given without one [default: 5310, or
    /// $NICBENCH_PORT, which `nicbench lab exec` sets].
    #[arg(short, long, env = "NICBENCH_PORT", hide_env = true, value_parser = parse::port_to_connect)]
    pub port: Option<u16>,
    /// Use IPv4 only.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Local address, or interface name whose address to use: this host's
    /// traffic leaves by that interface.
    #[arg(short = 'B', long, value_name = "ADDR|IFACE")]
    pub bind: Option<String>,
    /// What goes into the test's spec: time, warm-up, buffers, pinning.
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Print the result as one JSON document (docs/SCHEMA.md).
    #[arg(long)]
    pub json: bool,
    /// Where each agent's run is saved, and its tags.
    #[command(flatten)]
    pub save: super::store::SaveArgs,
    /// How long to wait for each agent to accept the control connection.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse::positive_duration)]
    pub connect_timeout: Duration,
    /// When an agent is busy, wait in its queue up to this long.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse::queue_wait)]
    pub wait: Duration,
    /// Pre-shared key file, for agents started with --psk-file (one key for all).
    #[arg(long, value_name = "FILE", env = "NICBENCH_PSK_FILE")]
    pub psk_file: Option<std::path::PathBuf>,
}

/// A fan-out command: the workload, the shared options, and the matches
/// its registry entry turns into the spec.
#[derive(Debug, Clone)]
pub struct Fanout {
    pub workload: &'static str,
    pub args: FanoutArgs,
    pub matches: ArgMatches,
}

impl Fanout {
    fn entry(name: &str) -> Option<&'static dyn Workload> {
        crate::workload::find(name).ok().filter(|w| !w.measuring_command())
    }

    /// The registered workload.
    pub fn of(&self) -> &'static dyn Workload {
        Fanout::entry(self.workload).expect("parsed from a registered workload")
    }
}

impl FromArgMatches for Fanout {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let missing = || clap::Error::raw(clap::error::ErrorKind::MissingSubcommand, "no fan-out command given");
        let (name, sub) = matches.subcommand().ok_or_else(missing)?;
        let workload = Fanout::entry(name).ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::InvalidSubcommand,
                format!("'{name}' is not a fan-out command"),
            )
        })?;
        Ok(Fanout {
            workload: workload.name(),
            args: FanoutArgs::from_arg_matches(sub)?,
            matches: sub.clone(),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Fanout::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for Fanout {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        let fanning = crate::workload::REGISTRY.iter().filter(|w| !w.measuring_command());
        fanning.fold(command, |command, w| {
            let sub = FanoutArgs::augment_args(clap::Command::new(w.name()));
            command.subcommand(w.command_line().command(sub))
        })
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        Fanout::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        Fanout::entry(name).is_some()
    }
}
