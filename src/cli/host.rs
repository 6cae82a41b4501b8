//! Options of `nicbench host`.

use std::net::IpAddr;

use clap::Args;

/// `nicbench host`
#[derive(Debug, Clone, Args)]
pub struct HostArgs {
    /// Ask the agent on HOST for its facts instead (`nicbench serve` must
    /// run there); its interface is the one toward this client.
    #[arg(long, value_name = "HOST", conflicts_with_all = ["interface", "peer"])]
    pub remote: Option<String>,
    /// Agent control port (with --remote) [default: 5310, or
    /// $NICBENCH_PORT; a port in HOST:PORT also works].
    #[arg(short, long, env = "NICBENCH_PORT", hide_env = true, value_parser = crate::cli::parse::port_to_connect)]
    pub port: Option<u16>,
    /// Show this interface only.
    #[arg(short = 'I', long, value_name = "NAME", conflicts_with = "peer")]
    pub interface: Option<String>,
    /// Show the interface the route to this address leaves from (no
    /// traffic is sent).
    #[arg(long, value_name = "ADDR")]
    pub peer: Option<IpAddr>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the agent to accept the control connection.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = super::parse::positive_duration)]
    pub connect_timeout: std::time::Duration,
    /// Pre-shared key file, for an agent started with --psk-file (with --remote).
    #[arg(long, value_name = "FILE", env = "NICBENCH_PSK_FILE")]
    pub psk_file: Option<std::path::PathBuf>,
}
