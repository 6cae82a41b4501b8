//! `nicbench serve --metrics-listen`: the agent's metrics server, and the
//! `/probe` handler (`--metrics-probe`) that runs one test from this agent
//! toward another agent. The handler asks its own agent for a peer test
//! (the request `nicbench mesh` sends), so a probe passes every check a
//! peer test does: `--allow-peer-tests`, the key, the agent's limits, its
//! test slot, and a target that proves the same key before any data.

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::Context;

use crate::cli::ServeArgs;
use crate::metrics::{self, AgentMetrics, BearerToken, MetricsServer, ProbeError, ProbeQuery, Routes};
use crate::session;

/// Starts the metrics server when `--metrics-listen` asks for one; its
/// connections pass the agent's connection `gate`.
pub fn start(
    args: &ServeArgs,
    agent: SocketAddr,
    gate: std::sync::Arc<crate::protocol::gate::ConnectionGate>,
) -> anyhow::Result<Option<MetricsServer>> {
    let Some(listen) = args.metrics_listen else {
        return Ok(None);
    };
    if args.metrics_probe && args.metrics_token_file.is_none() && !listen.ip().to_canonical().is_loopback() {
        anyhow::bail!(
            "--metrics-probe on {listen} without --metrics-token-file: anyone who reaches that address could make \
             this agent connect to any host and port and tell open ports from closed ones by how its answer \
             comes; give --metrics-token-file FILE, or serve metrics on a loopback address (e.g. 127.0.0.1:9310)"
        );
    }
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
        probe: args.metrics_probe.then(|| -> metrics::ProbeHandler {
            Box::new(move |q: &ProbeQuery| run_probe(q, psk_file.as_deref(), agent))
        }),
        probe_token,
        gate: Some(gate),
    };
    let server = MetricsServer::start(listen, routes).with_context(|| format!("cannot listen on {listen}"))?;
    eprintln!(
        "nicbench agent {} serving metrics on http://{}/metrics{}",
        env!("CARGO_PKG_VERSION"),
        server.local_addr(),
        match (args.metrics_probe, args.metrics_token_file.is_some()) {
            (false, _) => "",
            (true, true) => " and /probe (bearer token required)",
            (true, false) => " and /probe (no token, loopback only: anyone on this host can start tests)",
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
    let (measure, spec) = super::measurement(&argv)?;
    Ok((super::measure::target(&measure)?, spec))
}

/// The agent's own control address as a client reaches it: the loopback
/// address of its family when it listens on all addresses.
fn own_address(agent: SocketAddr) -> String {
    match agent.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => "::1".into(),
        ip => ip.to_string(),
    }
}

/// Runs one probe as a peer test of this agent: Ok with the run's figures,
/// or with `probe_success 0` when the test failed (the reason is logged);
/// 503 when this agent is busy with another test.
fn run_probe(q: &ProbeQuery, psk_file: Option<&std::path::Path>, agent: SocketAddr) -> Result<String, ProbeError> {
    let started = Instant::now();
    let (_, spec) = probe_test(q, psk_file).map_err(|e| ProbeError::BadRequest(super::failure::one_line(&e)))?;
    let (host, port) = crate::address::agent_address(&q.target, None, None)
        .map_err(|e| ProbeError::BadRequest(format!("target: {e}")))?;
    let toward = crate::address::display(&host, port);
    let me = session::Target {
        host: own_address(agent),
        port: agent.port(),
        family: None,
        bind: None,
        connect_timeout: std::time::Duration::from_secs(5),
        wait: std::time::Duration::ZERO,
        psk_file: psk_file.map(Into::into),
    };
    match session::peer_test(&me, &toward, &spec) {
        Ok(run) => {
            log::info!("probe {} toward {toward}: done", q.workload);
            Ok(metrics::blackbox::probe_exposition_with(
                &q.target,
                &run,
                started.elapsed(),
            ))
        }
        Err(e @ session::SessionError::Busy { .. }) => Err(ProbeError::Busy(e.to_string())),
        Err(e) => {
            log::warn!("probe {} toward {toward} failed: {e}", q.workload);
            Ok(metrics::probe_failure_exposition(&q.target, started.elapsed()))
        }
    }
}
