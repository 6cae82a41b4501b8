//! `--links` and `--scaling` of the measuring commands: the typed pairs
//! (or `auto`) resolved against this host's and the agent's addresses into
//! the spec, and with `--scaling` each link measured alone before the run,
//! its figure put beside the link's in the result.

use std::net::{IpAddr, ToSocketAddrs};

use anyhow::Context;

use crate::cli::MeasureArgs;
use crate::model::{RunResult, TestSpec};
use crate::multilink::{self, LinksArg};
use crate::probe::nic;
use crate::repeat::CaseOptions;
use crate::session::{self, Target};
use crate::stats::Policy;
use crate::workload::SpecError;

/// The spec with the links of `--links` resolved (streams: -P per link),
/// or the spec as it is without `--links`.
pub fn prepare(m: &MeasureArgs, spec: &TestSpec, target: &Target, iperf3: bool) -> anyhow::Result<TestSpec> {
    let Some(arg) = &m.links else {
        return Ok(spec.clone());
    };
    let workload = crate::workload::find(&spec.workload)?;
    if !workload.supports_links() {
        return Err(SpecError::Invalid(format!(
            "the {} workload does not run over several links; drop --links",
            spec.workload
        ))
        .into());
    }
    // Before the agent is asked for its addresses: the spec's own check
    // sees the links only once they are resolved.
    if let Some(transport) = crate::workload::transport_of(spec) {
        let asked = crate::workload::transport::Asked {
            chosen_by: "--transport",
            options: vec![("--links", crate::workload::transport::Setting::Links)],
            tls: None,
        };
        transport.refuse(&asked).map_err(SpecError::Invalid)?;
    }
    if iperf3 {
        return Err(
            SpecError::Invalid("--links needs a nicbench agent; an iperf3 server cannot take it".into()).into(),
        );
    }
    if m.bind.is_some() {
        return Err(SpecError::Invalid(
            "--links gives every link its local address; -B/--bind cannot be used with it".into(),
        )
        .into());
    }
    let agent = session::agent_addresses(target)
        .with_context(|| format!("asking the agent at {} for its addresses (--links)", target.host))?;
    let local = nic::interface_addresses_with_prefix();
    let resolve_host = |name: &str| -> Vec<IpAddr> {
        (name, 0)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|a| a.ip()).collect())
            .unwrap_or_default()
    };
    let pairs = multilink::resolve(arg, &local, &agent, &resolve_host, &nic::local_address_toward)
        .map_err(|e| SpecError::Invalid(format!("--links: {e}")))?;
    if matches!(arg, LinksArg::Auto) {
        log::info!(
            "--links auto: {}",
            pairs.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",")
        );
    }
    let mut spec = spec.clone();
    spec.streams = m
        .spec
        .streams
        .checked_mul(pairs.len() as u32)
        .filter(|n| *n <= crate::model::spec::MAX_STREAMS)
        .ok_or_else(|| {
            SpecError::Invalid(format!(
                "--links: {} links x {} streams (-P) is more than {} streams",
                pairs.len(),
                m.spec.streams,
                crate::model::spec::MAX_STREAMS
            ))
        })?;
    spec.links = pairs;
    Ok(spec)
}

/// `--scaling`: each link of `spec` alone, one trial each; returns each
/// link's receiver rate in the order of `spec.links`.
pub fn each_alone(
    m: &MeasureArgs,
    spec: &TestSpec,
    target: &Target,
    interrupted: &(dyn Fn() -> Option<String> + Sync),
) -> anyhow::Result<Vec<f64>> {
    let mut alone = Vec::with_capacity(spec.links.len());
    for (i, pair) in spec.links.iter().enumerate() {
        let mut one = spec.clone();
        one.links = vec![*pair];
        one.streams = m.spec.streams;
        let options = CaseOptions {
            policy: Policy::SINGLE,
            interrupted,
            progress: None,
            on_trial: None,
        };
        let run = super::trials::run_case(target, &one, options, &|| None, &|| None)
            .map_err(|f| anyhow::Error::new(f.error))
            .with_context(|| format!("--scaling: link {} ({pair}) alone", i + 1))?;
        let rate = run
            .result
            .links
            .as_ref()
            .and_then(|l| l.links.first())
            .map_or(run.result.sum.receiver.bits_per_second, |l| l.receiver_bits_per_second);
        if log::log_enabled!(log::Level::Warn) {
            eprintln!("link {} ({pair}) alone: {}", i + 1, crate::units::Rate(rate));
        }
        alone.push(rate);
    }
    Ok(alone)
}

/// Puts each link's figure alone beside its figure together, in every
/// trial, and judges again.
pub fn apply_alone(run: &mut RunResult, alone: &[f64], m: &MeasureArgs) {
    for trial in std::iter::once(&mut run.result).chain(run.trials.iter_mut()) {
        if let Some(summary) = trial.links.as_mut() {
            for (l, rate) in summary.links.iter_mut().zip(alone) {
                l.alone_receiver_bits_per_second = Some(*rate);
            }
            multilink::rescale(summary);
        }
    }
    crate::verdict::annotate_link(run, m.link_speed, m.link_overhead);
}
