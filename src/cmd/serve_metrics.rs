//! `nicbench serve --metrics-listen`: the agent's metrics server, and the
//! `/probe` handler (`--metrics-probe`) that runs one test from this agent
//! toward another agent with the client code of `nicbench tcp|udp|rr`.

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;

use crate::cli::{Cli, Command, ServeArgs};
use crate::metrics::{self, AgentMetrics, BearerToken, MetricsServer, ProbeError, ProbeQuery, Routes};
use crate::session::{self, RunOptions};

/// Starts the metrics server when `--metrics-listen` asks for one.
pub fn start(args: &ServeArgs, agent: SocketAddr) -> anyhow::Result<Option<MetricsServer>> {
    let Some(listen) = args.metrics_listen else {
        return Ok(None);
    };
    AgentMetrics::global().set_host_facts(&crate::probe::host::facts_toward(agent.ip()));
    let probe_token = args
        .metrics_token_file
        .as_deref()
        .map(BearerToken::from_file)
        .transpose()
        .map_err(anyhow::Error::msg)
        .context("--metrics-token-file")?;
    let psk_file = args.psk_file.clone();
    let routes = Routes {
        metrics: Box::new(|| AgentMetrics::global().render()),
        probe: args
            .metrics_probe
            .then(|| -> metrics::ProbeHandler { Box::new(move |q: &ProbeQuery| run_probe(q, psk_file.as_deref())) }),
        probe_token,
    };
    let server = MetricsServer::start(listen, routes).with_context(|| format!("cannot listen on {listen}"))?;
    eprintln!(
        "nicbench agent {} serving metrics on http://{}/metrics{}",
        env!("CARGO_PKG_VERSION"),
        server.local_addr(),
        match (args.metrics_probe, args.metrics_token_file.is_some()) {
            (false, _) => "",
            (true, true) => " and /probe (bearer token required)",
            (true, false) => " and /probe (no token: anyone who reaches this port can start tests)",
        }
    );
    Ok(Some(server))
}

/// The test a probe asks for, built by the same parser and defaults as the
/// `nicbench tcp|udp|rr HOST -t SECONDS` command line.
fn probe_test(
    q: &ProbeQuery,
    psk_file: Option<&std::path::Path>,
) -> anyhow::Result<(session::Target, crate::model::TestSpec)> {
    let seconds = format!("{}s", q.duration_or_default().as_secs_f64());
    let mut argv = vec![
        "nicbench".to_string(),
        q.workload.clone(),
        q.target.clone(),
        "-t".into(),
        seconds,
    ];
    if let Some(path) = psk_file {
        argv.push("--psk-file".into());
        argv.push(path.display().to_string());
    }
    let cli = Cli::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?;
    match cli.command {
        Command::Tcp(a) => Ok((super::measure::target(&a.measure)?, super::tcp::spec(&a)?)),
        Command::Udp(a) => Ok((super::measure::target(&a.measure)?, super::udp::spec(&a)?)),
        Command::Rr(a) => Ok((super::measure::target(&a.measure)?, super::rr::spec(&a)?)),
        _ => anyhow::bail!("a probe runs tcp, udp or rr"),
    }
}

/// Runs one probe: Ok with the run's figures, or with `probe_success 0`
/// when the test failed (the reason is logged).
fn run_probe(q: &ProbeQuery, psk_file: Option<&std::path::Path>) -> Result<String, ProbeError> {
    let started = Instant::now();
    let (target, spec) = probe_test(q, psk_file).map_err(|e| ProbeError::BadRequest(format!("{e:#}")))?;
    let options = RunOptions {
        interrupted: &|| None,
        on_interval: None,
        on_progress: None,
        trial: 1,
    };
    match session::run(&target, &spec, options) {
        Ok(run) => {
            crate::logging::info(&format!("probe {} toward {}: done", q.workload, q.target));
            Ok(metrics::probe::probe_exposition_with(
                &q.target,
                &run,
                started.elapsed(),
            ))
        }
        Err(e) => {
            crate::logging::warn(&format!("probe {} toward {} failed: {e}", q.workload, q.target));
            Ok(metrics::probe_failure_exposition(&q.target, started.elapsed()))
        }
    }
}
