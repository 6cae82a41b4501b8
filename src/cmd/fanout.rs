//! The fan-out commands (`nicbench multicast`): one test against every
//! agent named, one local side, each agent's trial read by its workload
//! (its [`FanoutView`]), the worst one's trial as the run. Nothing here
//! names a workload.
//!
//! [`FanoutView`]: crate::workload::FanoutView

use anyhow::Context as _;

use crate::address::Family;
use crate::cli::fanout::{Fanout, FanoutArgs};
use crate::model::receivers::GroupRun;
use crate::session::{self, RunOptions, Target};
use crate::workload::FanoutAgent;

use super::signals;

/// Every agent's target, checked before anything connects.
fn targets(args: &FanoutArgs) -> anyhow::Result<Vec<Target>> {
    let family = match (args.ipv4, args.ipv6) {
        (true, _) => Some(Family::V4),
        (_, true) => Some(Family::V6),
        _ => None,
    };
    let bind = args
        .bind
        .as_deref()
        .map(|b| super::measure::bind_address(b, family))
        .transpose()?;
    let mut seen = std::collections::BTreeSet::new();
    args.agents
        .iter()
        .map(|named| {
            let (host, port) = crate::address::agent_address(named, args.port, family)
                .map_err(|e| super::UsageError(format!("agent '{named}': {e}")))?;
            if !seen.insert((host.clone(), port)) {
                return Err(super::UsageError(format!("{host}:{port} is named twice; name each agent once")).into());
            }
            Ok(Target {
                host,
                port,
                family,
                bind,
                connect_timeout: args.connect_timeout,
                wait: args.wait,
                psk_file: args.psk_file.clone(),
            })
        })
        .collect()
}

/// Runs one fan-out command.
pub fn run(command: Fanout) -> anyhow::Result<()> {
    let workload = command.of();
    let view = workload
        .fanout()
        .expect("a fan-out command's workload reads its agents");
    let spec = workload
        .command_line()
        .spec(&command.matches)
        .and_then(|spec| workload.validate(&spec).map(|()| spec))
        .map_err(|e| super::UsageError(e.to_string()))?;
    let args = &command.args;
    let targets = targets(args)?;
    signals::install();
    if !args.json {
        super::stdout::err_line(view.heading(&spec, targets.len()));
    }
    let options = RunOptions {
        interrupted: &signals::client_stop_reason,
        on_interval: None,
        on_progress: None,
        trial: 1,
        settings: Default::default(),
    };
    let ran = session::run_fanout(&targets, &spec, options).with_context(|| format!("the {} test", spec.workload))?;
    let agents = ran
        .agents
        .into_iter()
        .zip(&args.agents)
        .map(|(trial, named)| FanoutAgent {
            // As named on the command line: two agents of one host differ by port.
            name: named.clone(),
            result: trial
                .result
                .map(|result| {
                    // Each agent's trial judged as a run of its own would be.
                    let run = session::one_trial_run(
                        &spec,
                        ran.started_at,
                        ran.client_addr,
                        trial.agent.clone(),
                        result,
                        None,
                    );
                    run.result
                })
                .map_err(|e| e.to_string()),
            agent: trial.agent,
        })
        .collect();
    let (receivers, worst) = view.read(&spec, agents);
    let Some(worst) = worst else {
        let why: Vec<String> = receivers.iter().map(|r| format!("{}: {}", r.name, r.verdict)).collect();
        return Err(session::SessionError::Stream {
            stream_id: 1,
            role: "receiver",
            message: format!("no agent reported: {}", why.join("; ")),
        }
        .into());
    };
    let top = &receivers[worst];
    let trial = top.result.clone().expect("the worst has a trial");
    let agent = top.agent.clone();
    let mut run = session::one_trial_run(&spec, ran.started_at, ran.client_addr, agent, trial, None);
    if run.result.interruption.is_none() {
        run.result.interruption = ran.interruption;
        run.interrupted = run.result.interruption.is_some();
    }
    let document = GroupRun { run, receivers };
    super::stdout::write_out(|out| match args.json {
        true => serde_json::to_writer_pretty(&mut *out, &document)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out)),
        false => view.write_text(&document, out),
    })?;
    if document.receivers.iter().all(|r| r.standing == "failed") {
        return Err(session::SessionError::Stream {
            stream_id: 1,
            role: "receiver",
            message: format!(
                "every agent's side failed; {}: {}",
                document.receivers[worst].name, document.receivers[worst].verdict
            ),
        }
        .into());
    }
    if let Some(interruption) = &document.run.result.interruption {
        return Err(super::measure::CutShort {
            reason: interruption.reason.clone(),
            after: crate::workload::args::parse::duration_in_words(interruption.elapsed_seconds),
        }
        .into());
    }
    Ok(())
}
