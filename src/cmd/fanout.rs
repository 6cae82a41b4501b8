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
use crate::model::{RunResult, TestSpec};
use crate::report::Reporter;
use crate::session::{self, RunOptions, Target};
use crate::store::tags::{Tag, FANOUT_AGENT, FANOUT_RUN, FANOUT_SLOWEST};
use crate::workload::FanoutAgent;

use super::measure::Audience;
use super::signals;

/// Every agent's target, checked before anything connects, and the
/// sending agent's (`--sender`), which is none of them.
fn targets(args: &FanoutArgs) -> anyhow::Result<(Vec<Target>, Option<Target>)> {
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
    let mut target = |named: &String, what: &str| -> anyhow::Result<Target> {
        let (host, port) = crate::address::agent_address(named, args.port, family)
            .map_err(|e| super::UsageError(format!("{what} '{named}': {e}")))?;
        if !seen.insert((host.clone(), port)) {
            return Err(super::UsageError(format!(
                "{host}:{port} is named twice; name each agent once (the sender is not a receiver)"
            ))
            .into());
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
    };
    let sender = args.sender.as_ref().map(|named| target(named, "sender")).transpose()?;
    let receivers = args
        .agents
        .iter()
        .map(|named| target(named, "agent"))
        .collect::<anyhow::Result<_>>()?;
    Ok((receivers, sender))
}

/// Runs one fan-out command.
pub fn run(command: Fanout) -> anyhow::Result<()> {
    measure_for(command, None, Audience::Terminal).map(|_| ())
}

/// How a fan-out command ended: the group's document, and the store's id
/// of the run it reports (its slowest agent's; None when not saved).
pub struct FanoutEnded {
    pub document: GroupRun,
    pub run_id: Option<i64>,
}

/// Runs one fan-out command for `audience`: the terminal (the command
/// itself), or a plan running it as a case, which gets the document and
/// prints nothing of it. `names` are the agents' names in the document and
/// their runs' `agent` tags (a plan's labels), one per agent; without
/// them, each agent as the command line names it.
pub fn measure_for(command: Fanout, names: Option<&[String]>, audience: Audience) -> anyhow::Result<FanoutEnded> {
    let terminal = matches!(audience, Audience::Terminal);
    let workload = command.of();
    let view = workload
        .fanout()
        .expect("a fan-out command's workload reads its agents");
    let args = &command.args;
    let spec = workload
        .command_line()
        .spec(&command.matches)
        .and_then(|mut spec| match &args.sender {
            Some(named) => view.sent_by_agent(&mut spec, named).map(|()| spec),
            None => workload.validate(&spec).map(|()| spec),
        })
        .map_err(|e| super::UsageError(e.to_string()))?;
    let (targets, sender) = targets(args)?;
    let names: Vec<String> = match names {
        Some(names) if names.len() == args.agents.len() => names.to_vec(),
        Some(names) => {
            return Err(anyhow::anyhow!(
                "{} names for {} agents: one name per agent",
                names.len(),
                args.agents.len()
            ))
        }
        None => args.agents.clone(),
    };
    signals::install();
    if terminal && !args.json {
        super::stdout::err_line(view.heading(&spec, targets.len()));
    }
    // The lab switch's view of the group: its counters now, its mdb once
    // the warm-up is over (read on a thread of its own, so the sampling
    // goes on), its counters again after the test.
    let watch = view.group(&spec).map(super::switch::Watch::start);
    let (warmed_up, warmup_end) = std::sync::mpsc::sync_channel(1);
    let mut on_interval: Vec<crate::workload::base::runner::IntervalCallback> = Vec::new();
    if matches!(watch, Some(Ok(_))) {
        on_interval.push(super::switch::on_warmup_end(warmed_up));
    }
    if let Audience::Plan(case) = audience {
        let sink = std::sync::Arc::clone(&case.on_interval);
        on_interval.push(Box::new(move |tick| sink(tick)));
    }
    let options = RunOptions {
        interrupted: &signals::client_stop_reason,
        on_interval: (!on_interval.is_empty()).then(|| -> crate::workload::base::runner::IntervalCallback {
            Box::new(move |tick| on_interval.iter().for_each(|each| each(tick)))
        }),
        on_progress: None,
        trial: 1,
        settings: Default::default(),
    };
    let (ran, mdb) = std::thread::scope(|scope| {
        let reader = match &watch {
            Some(Ok(watch)) => Some(scope.spawn(move || warmup_end.recv().ok().map(|()| watch.mdb_now()))),
            _ => None,
        };
        let ran = session::run_fanout(&targets, sender.as_ref(), &spec, options);
        let mdb = reader.and_then(|r| r.join().unwrap_or_else(|_| Some(Err("the mdb reader panicked".into()))));
        (ran, mdb)
    });
    let ran = ran.with_context(|| format!("the {} test", spec.workload))?;
    let switch = watch.map(|watch| watch.and_then(|watch| watch.finish(mdb)));
    // The sending end of every trial: the sending agent, or this host.
    let client = |spec: &TestSpec| match &ran.sender {
        Some(sender) => sender.clone(),
        None => crate::model::Endpoint {
            address: ran.client_addr.to_string(),
            facts: crate::workload::host_facts_for(spec, ran.client_addr.ip()),
        },
    };
    // Each agent's trial as a run of its own: judged, and saved as one.
    let runs: Vec<Result<RunResult, String>> = ran
        .agents
        .iter()
        .map(|trial| match &trial.result {
            Ok(result) => Ok(session::trial_run_between(
                &spec,
                ran.started_at,
                client(&spec),
                trial.agent.clone(),
                result.clone(),
                None,
            )),
            Err(e) => Err(e.to_string()),
        })
        .collect();
    let agents = ran
        .agents
        .into_iter()
        .zip(&names)
        .zip(&runs)
        .map(|((trial, named), run)| FanoutAgent {
            // As named: a plan's label, else the command line's (two agents of one host differ by port).
            name: named.clone(),
            result: run.as_ref().map(|run| run.result.clone()).map_err(Clone::clone),
            agent: trial.agent,
        })
        .collect();
    let (mut receivers, worst) = view.read(&spec, agents);
    if let Some(Ok(switch)) = &switch {
        view.read_switch(&mut receivers, switch);
    }
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
    let mut run = session::trial_run_between(&spec, ran.started_at, client(&spec), agent, trial, None);
    if run.result.interruption.is_none() {
        run.result.interruption = ran.interruption;
        run.interrupted = run.result.interruption.is_some();
    }
    let (switch, unread) = match switch {
        Some(Ok(switch)) => (Some(switch), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let document = GroupRun { run, receivers, switch };
    let command_line = match audience {
        Audience::Plan(case) => case.command_line.clone(),
        Audience::Terminal => super::save::command_line(),
    };
    if terminal {
        super::stdout::write_out(|out| match args.json {
            true => serde_json::to_writer_pretty(&mut *out, &document)
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out)),
            false => view.write_text(&document, out).and_then(|()| match &unread {
                Some(why) => writeln!(out, "the switch's mdb: {why}"),
                None => Ok(()),
            }),
        })?;
    } else if let Some(why) = &unread {
        // A plan's case prints none of the document: the log says it.
        log::warn!("the switch's mdb: {why}");
    }
    let saved = save(args, &spec, &document, &runs, command_line, terminal);
    let run_id = saved.get(worst).copied().flatten();
    fanout_failure(&document, worst)?;
    Ok(FanoutEnded { document, run_id })
}

/// The error a fan-out test ends with: every agent's side failed, or the
/// test was cut short (its runs are saved, marked so).
fn fanout_failure(document: &GroupRun, worst: usize) -> anyhow::Result<()> {
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

/// Saves each agent's run as a run of its own, tagged with the test they
/// share (`fanout_run`), the agent's name (`agent`) and whether it is the
/// one the document reports (`slowest`), besides the command's tags; says
/// which runs it saved when `tell`. A run the store refuses is said, and
/// the rest go on. Returns each agent's run id (None: not saved).
fn save(
    args: &FanoutArgs,
    spec: &TestSpec,
    document: &GroupRun,
    runs: &[Result<RunResult, String>],
    command_line: String,
    tell: bool,
) -> Vec<Option<i64>> {
    let mut ids = vec![None; runs.len()];
    if args.save.no_save {
        return ids;
    }
    let fanout_run = format!(
        "{}-{:06x}",
        document.run.started_at_unix_seconds as u64,
        (document.run.started_at_unix_seconds.fract() * 16_777_216.0) as u64
    );
    let tag = |key: &str, value: &str| Tag {
        key: key.into(),
        value: value.into(),
    };
    let mut saved = Vec::new();
    for ((receiver, run), id) in document.receivers.iter().zip(runs).zip(&mut ids) {
        let Ok(run) = run else { continue };
        let mut save_args = args.save.clone();
        save_args.tags.extend([
            tag(FANOUT_RUN, &fanout_run),
            tag(FANOUT_AGENT, &receiver.name),
            tag(FANOUT_SLOWEST, if receiver.slowest { "true" } else { "false" }),
        ]);
        let mut text = Vec::new();
        let _ = crate::report::text::Text.render(run, &mut text);
        let mut saver = super::save::Saver::start(&save_args, command_line.clone(), Some(1));
        saver.trial(run);
        match saver.finish(run, Some(&String::from_utf8_lossy(&text))) {
            Ok(Some(done)) => {
                *id = Some(done.id);
                saved.push(format!("{} ({})", done.id, receiver.name));
            }
            Ok(None) => {}
            Err(e) => super::stdout::err_line(format!(
                "{}'s run of {} was not saved: {e:#}",
                receiver.name, spec.workload
            )),
        }
    }
    if tell && !saved.is_empty() {
        super::stdout::err_line(format!(
            "saved as runs {} in {}, tagged fanout_run={fanout_run}",
            saved.join(", "),
            super::save::database_path(&args.save.db).display()
        ));
    }
    ids
}
