//! `nicbench mesh`: options of a measurement mesh.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::parse;
use super::store::SaveArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MeshFormat {
    Text,
    Markdown,
    Csv,
    Json,
}

/// `nicbench mesh HOST... --workload tcp|udp|rr`
#[derive(Debug, Args)]
pub struct MeshArgs {
    /// The agents: HOST, HOST:PORT, NAME=HOST[:PORT] (NAME labels the host
    /// in the matrix, the tags and the metrics), or dns:NAME[:PORT] for every
    /// address of a name (a Kubernetes headless Service). Every agent runs
    /// `nicbench serve --allow-peer-tests --psk-file F` with the same key.
    #[arg(value_name = "HOST")]
    pub hosts: Vec<String>,
    /// More agents from a file: one `HOST[:PORT] [NAME]` per line, the JSON
    /// of `kubectl get nodes -o json` (each node's InternalIP), or an Ansible
    /// INI inventory (`ansible_host`, `ansible_port`, groups, ranges).
    #[arg(long, value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
    /// With an Ansible inventory: only the hosts of this group (and its
    /// children).
    #[arg(long, value_name = "GROUP", requires = "hosts_file")]
    pub hosts_group: Option<String>,
    /// Serve Prometheus metrics of the mesh on this address (GET /metrics):
    /// per pair the latest throughput, loss, RTT, CPU cost and test time;
    /// tests run and failed. Best with --every.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// What each ordered pair runs: tcp and udp give the receiver's
    /// throughput, rr the median round trip.
    #[arg(short = 'w', long, default_value = crate::workload::bulk_streams(crate::workload::transport::Proto::TCP).name(),
          value_parser = clap::builder::PossibleValuesParser::new(crate::workload::peer_test_names()))]
    pub workload: String,
    /// How long each test sends, after its warm-up.
    #[arg(short = 't', long = "time", value_name = "DURATION", default_value = "10s",
          value_parser = parse::test_duration)]
    pub duration: Duration,
    /// Warm-up of each test, excluded from its figure.
    #[arg(short = 'O', long, value_name = "DURATION", default_value = "0s", value_parser = parse::warmup)]
    pub omit: Duration,
    /// Parallel streams of each test.
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1,
          value_parser = parse::between::<u32>(1, crate::model::spec::MAX_STREAMS as u64))]
    pub streams: u32,
    /// Control port of agents given without one.
    #[arg(short, long, env = "NICBENCH_PORT", hide_env = true, value_parser = crate::cli::parse::port_to_connect, default_value_t = crate::protocol::DEFAULT_PORT)]
    pub port: u16,
    /// The agents' pre-shared key: the coordinator proves it to each agent,
    /// and each agent checks that its partner proves it too.
    #[arg(long, value_name = "FILE", env = "NICBENCH_PSK_FILE")]
    pub psk_file: Option<PathBuf>,
    /// How long a test may wait in an agent's queue before its cell is
    /// reported as busy and the mesh goes on.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse::queue_wait)]
    pub wait: Duration,
    /// rr only: run both directions of each pair at once (each host in at
    /// most two tests, once per role), halving the rounds. The agents need
    /// `serve --max-concurrent 2`.
    #[arg(long)]
    pub overlap: bool,
    /// The mesh's name: tag `mesh` on every saved run, and the name to
    /// select them by.
    #[arg(long, value_name = "NAME", default_value = "mesh")]
    pub name: String,
    /// Keep measuring: a new mesh run every DURATION (each start shifted
    /// by a random offset of up to a tenth of it, so that the meshes of
    /// many coordinators do not align), until Ctrl-C.
    #[arg(long, value_name = "DURATION", value_parser = parse::positive_duration)]
    pub every: Option<Duration>,
    /// With --every: stop after N mesh runs.
    #[arg(long, value_name = "N", requires = "every", value_parser = parse::between::<u32>(1, 1_000_000))]
    pub runs: Option<u32>,
    /// After each mesh run, remove this mesh's saved runs that started more
    /// than DURATION before it (e.g. 30d).
    #[arg(long, value_name = "DURATION", value_parser = parse::positive_duration)]
    pub keep: Option<Duration>,
    /// How to print the matrix.
    #[arg(long, value_enum, default_value = "text")]
    pub format: MeshFormat,
    /// Also write the matrix as a heat map (SVG or PNG by the extension).
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
    #[command(flatten)]
    pub save: SaveArgs,
    /// Options of the workload for every test, after `--`, as its own
    /// command takes them: `-- -b 200M -l 1400` (udp), `-- -r 64,64` (rr).
    #[arg(last = true, value_name = "WORKLOAD OPTIONS", allow_hyphen_values = true)]
    pub options: Vec<String>,
}
