//! Running a measuring command: options to spec and target, the test, and
//! the chosen output. Shared by every workload's command.

use std::io::Write;
use std::net::IpAddr;

use anyhow::Context;

use super::save::{self, Saver};
use super::signals;
use super::trials;
use crate::address::Family;
use crate::cli::MeasureArgs;
use crate::model::RunResult;
use crate::probe::nic;
use crate::repeat::{self, CaseOptions};
use crate::report::json::{Json, StreamEvent};
use crate::report::text::{interval_has_tcp, interval_header, interval_lines, Text};
use crate::report::Reporter;
use crate::session::Target;
use crate::stats::Policy;
use crate::workload::runner::{IntervalCallback, IntervalTick, ProgressCallback};
use crate::workload::{SpecError, TestSpec};

/// `-B`: an address, or an interface whose address of the wanted family is used.
pub fn bind_address(bind: &str, family: Option<Family>) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = bind.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok(ip);
    }
    let invalid = |why: &str| SpecError::Invalid(format!("-B {bind}: {why}"));
    let addresses: Vec<IpAddr> = nic::interface_addresses()
        .into_iter()
        .filter(|(name, _)| name == bind)
        .map(|(_, ip)| ip)
        .collect();
    if addresses.is_empty() && !nic::interface_names().iter().any(|name| name == bind) {
        return Err(invalid("not an IP address, and there is no interface of that name").into());
    }
    addresses
        .into_iter()
        .filter(|ip| match family {
            Some(Family::V4) => ip.is_ipv4(),
            Some(Family::V6) => ip.is_ipv6(),
            None => true,
        })
        // Prefer IPv4, then global IPv6 over link-local (which needs a scope).
        .min_by_key(|ip| match ip {
            IpAddr::V4(_) => 0,
            IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) != 0xfe80 => 1,
            IpAddr::V6(_) => 2,
        })
        .ok_or_else(|| invalid("the interface has no address of the requested family").into())
}

pub fn target(m: &MeasureArgs) -> anyhow::Result<Target> {
    target_and_credentials(m).map(|(target, _)| target)
}

/// [`target`] and the credentials of --iperf3-username, both checked
/// before anything connects.
fn target_and_credentials(m: &MeasureArgs) -> anyhow::Result<(Target, Option<crate::iperf3::auth::Credentials>)> {
    let family = if m.ipv4 {
        Some(Family::V4)
    } else if m.ipv6 {
        Some(Family::V6)
    } else {
        None
    };
    let (host, port) = match iperf3_peer(m)? {
        Some((host, port)) => super::address::agent_address(&host, Some(port), family)?,
        None => super::address::agent_address(&m.host, m.port, family)?,
    };
    let target = Target {
        host,
        port,
        family,
        bind: m.bind.as_deref().map(|b| bind_address(b, family)).transpose()?,
        connect_timeout: m.connect_timeout,
        wait: m.wait,
        psk_file: m.psk_file.clone(),
    };
    Ok((target, iperf3_credentials(m)?))
}

/// The credentials of --iperf3-username, checked before anything connects.
fn iperf3_credentials(m: &MeasureArgs) -> anyhow::Result<Option<crate::iperf3::auth::Credentials>> {
    use crate::iperf3::auth::{Credentials, Padding, PASSWORD_ENV};
    let (Some(username), Some(key)) = (&m.iperf3_username, &m.iperf3_rsa_public_key) else {
        return Ok(None);
    };
    if iperf3_peer(m)?.is_none() {
        return Err(super::UsageError(
            "--iperf3-username is for iperf3 servers: give the host as iperf3://HOST or add --iperf3".into(),
        )
        .into());
    }
    let padding = if m.iperf3_use_pkcs1_padding {
        Padding::Pkcs1v15
    } else {
        Padding::Oaep
    };
    Credentials::load(username, std::env::var(PASSWORD_ENV).ok(), key, padding)
        .map(Some)
        .map_err(|e| super::UsageError(e.to_string()).into())
}

/// The iperf3 server's host and port when the peer is one
/// (`iperf3://HOST[:PORT]` or `--iperf3`), None for a nicbench agent.
pub fn iperf3_peer(m: &MeasureArgs) -> anyhow::Result<Option<(String, u16)>> {
    // -p names the iperf3 server's port, but $NICBENCH_PORT (set by `lab
    // exec` to the nicbench agent's port) does not: iperf3 listens on 5201.
    let from_env = std::env::var("NICBENCH_PORT").ok().and_then(|p| p.parse::<u16>().ok());
    let given = m.port.filter(|p| Some(*p) != from_env);
    let default_port = |explicit: Option<u16>| explicit.or(given).unwrap_or(crate::iperf3::wire::DEFAULT_PORT);
    match crate::iperf3::parse_target(&m.host) {
        Some(Ok((host, port))) => Ok(Some((host, default_port(port)))),
        Some(Err(e)) => Err(SpecError::Invalid(e).into()),
        None if m.iperf3 => Ok(Some((m.host.clone(), default_port(None)))),
        None => Ok(None),
    }
}

/// The repetition policy the options ask for (one trial by default).
pub fn policy(m: &MeasureArgs) -> Policy {
    match (m.confidence, m.iterations) {
        (None, None) => Policy::Repeat {
            trials: m.repeat,
            pick: m.pick.into(),
        },
        (confidence, iterations) => {
            let (level_percent, width_percent) = confidence.unwrap_or((99.0, 5.0));
            let (max_trials, min_trials) = iterations.unwrap_or((10, 3));
            Policy::Confidence {
                level_percent,
                width_percent,
                max_trials,
                min_trials,
            }
        }
    }
}

/// A run that was cut short: its result is printed (and marked), but the
/// process must not exit 0, so no script stores it as a complete run.
#[derive(Debug, thiserror::Error)]
#[error(
    "the run was cut short{after} ({reason}); the result printed is marked interrupted \
     and covers only what ran: run the test again to completion"
)]
pub struct CutShort {
    pub reason: String,
    pub after: String,
}

impl CutShort {
    /// Exit code of a cut-short run (README, "Exit codes").
    pub const EXIT_CODE: i32 = 6;

    pub fn of(run: &RunResult) -> CutShort {
        match run.trials.iter().find_map(|t| t.interruption.as_ref()) {
            Some(i) => CutShort {
                reason: i.reason.clone(),
                after: match i.planned_seconds {
                    Some(planned) => format!(
                        " by the {} after {:.2} s of {planned:.2} s",
                        i.by.as_str(),
                        i.elapsed_seconds
                    ),
                    None => format!(" by the {} after {:.2} s", i.by.as_str(), i.elapsed_seconds),
                },
            },
            None => CutShort {
                reason: signals::client_stop_reason().unwrap_or_else(|| "interrupted".into()),
                after: format!(" between trials, after {} trial(s)", run.trials.len()),
            },
        }
    }
}

/// Hands the run to `output` (which prints and saves it), then fails with
/// [`CutShort`] if the run was cut short: a cut-short run is printed and
/// saved as incomplete, and the exit code says so.
pub fn conclude<T>(measured: Measured, output: impl FnOnce(Measured) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let cut_short = measured.run.interrupted.then(|| CutShort::of(&measured.run));
    let output = output(measured)?;
    match cut_short {
        Some(cut) => Err(cut.into()),
        None => Ok(output),
    }
}

/// A run whose trials are saved, and the save step that completes it.
pub struct Measured {
    pub run: RunResult,
    pub saver: Saver,
}

/// Prints the run as `m` asks and saves its final document; the text output
/// ends with the line naming the run id and the database (on stderr for
/// JSON, so the document stays the only thing on stdout).
/// The line rate and verdict again from what the command line and a lab
/// say: `--link-speed`, `--link-overhead`, and in a lab the router's shaper
/// on the path (the line rate unless --link-speed says otherwise) and
/// toward each address (each path of a multipath stream). Without any of
/// them the run keeps the verdict it has, unless `always`.
fn annotate_with_path(run: &mut crate::model::RunResult, m: &MeasureArgs, always: bool) {
    let shaper = m.link_speed.is_none().then(|| super::lab::router_shaper(run)).flatten();
    // The way back to the sender, read over the trials: its verdict too.
    let return_path = run.result.return_shaper.is_some() || run.trials.iter().any(|t| t.return_shaper.is_some());
    if always || m.link_speed.is_some() || m.link_overhead.is_some() || shaper.is_some() || return_path {
        crate::verdict::annotate_path(
            run,
            m.link_speed,
            m.link_overhead,
            shaper.as_ref(),
            &super::lab::router_shaper_toward,
        );
    }
}

pub fn finish(m: &MeasureArgs, run: &RunResult, saver: Saver) -> anyhow::Result<Option<i64>> {
    let text = (!m.json && !m.json_stream).then(|| {
        let mut buffer = Vec::new();
        let _ = Text.render(run, &mut buffer);
        String::from_utf8_lossy(&buffer).into_owned()
    });
    print(m, run)?;
    save(saver, run, text.as_deref(), text.is_some())
}

/// Saves the final document, then names the run on stdout (`to_stdout`) or
/// stderr. Returns the run's id (None with `--no-save`).
pub fn save(saver: Saver, run: &RunResult, text: Option<&str>, to_stdout: bool) -> anyhow::Result<Option<i64>> {
    let Some(saved) = saver.finish(run, text)? else {
        return Ok(None);
    };
    if to_stdout {
        let mut out = std::io::stdout().lock();
        let written = writeln!(out, "{}", saved.line).and_then(|_| out.flush());
        super::stdout::closed_pipe_is_the_end(written, "writing the result")?;
    } else if log::log_enabled!(log::Level::Warn) {
        eprintln!("{}", saved.line);
    }
    Ok(Some(saved.id))
}

/// Who a measuring command reports to: the terminal, as its options ask;
/// or a plan that runs it as one of its cases, which is handed each
/// interval and the run, and prints what it wants itself.
#[derive(Clone, Copy)]
pub enum Audience<'a> {
    Terminal,
    Plan(&'a AsCase),
}

/// A measuring command run as a plan's case: nothing of it is printed,
/// each interval goes to `on_interval`, and the run is stored with
/// `command_line` (the case's, as a person would type it).
pub struct AsCase {
    pub command_line: String,
    pub on_interval: std::sync::Arc<dyn Fn(&IntervalTick) + Send + Sync>,
}

/// Runs the trials of one test under the repetition policy of `m`, with
/// live interval output as asked and a line per trial on stderr; `adjust`
/// is applied to each trial's run as it ends (see
/// [`trials::run_case_adjusted`]), and `settings` reach the workload's side.
pub fn measure(
    m: &MeasureArgs,
    spec: &TestSpec,
    on_progress: &dyn Fn() -> Option<ProgressCallback>,
    adjust: &dyn Fn(&mut RunResult),
    settings: &crate::workload::Settings,
    audience: Audience,
) -> anyhow::Result<Measured> {
    signals::install();
    let json_stream = m.json_stream;
    let live = m.spec.interval.is_some() && !m.json;
    let on_interval = move || -> Option<IntervalCallback> {
        if let Audience::Plan(case) = audience {
            let sink = std::sync::Arc::clone(&case.on_interval);
            Some(Box::new(move |tick: &IntervalTick| sink(tick)))
        } else if json_stream {
            Some(Box::new(|tick: &IntervalTick| {
                let _ = StreamEvent::interval("client", tick).write_line(&mut std::io::stdout().lock());
            }))
        } else if live {
            let header = std::sync::OnceLock::new();
            Some(Box::new(move |tick: &IntervalTick| {
                let _ = live_interval_lines(tick, &header, &mut std::io::stdout().lock());
            }))
        } else {
            None
        }
    };
    let policy = policy(m);
    let mut stderr = std::io::stderr();
    let terminal = matches!(audience, Audience::Terminal);
    let show_trials = terminal && policy != Policy::SINGLE && log::log_enabled!(log::Level::Warn);
    let (target, iperf3_auth) = target_and_credentials(m)?;
    let trials_planned = match policy {
        Policy::Repeat { trials, .. } => trials,
        Policy::Confidence { max_trials, .. } => max_trials,
    };
    let command_line = match audience {
        Audience::Terminal => save::command_line(),
        Audience::Plan(case) => case.command_line.clone(),
    };
    let mut saver = Saver::start(&m.save, command_line, Some(trials_planned));
    let mut on_trial = |run: &RunResult| saver.trial(run);
    let options = CaseOptions {
        policy,
        interrupted: &signals::client_stop_reason,
        progress: show_trials.then_some(&mut stderr as &mut dyn Write),
        on_trial: Some(&mut on_trial),
    };
    let iperf3 = iperf3_peer(m)?.is_some();
    let spec = &super::multilink::prepare(m, spec, &target, iperf3)?;
    let alone = match m.scaling {
        true => Some(super::multilink::each_alone(m, spec, &target, options.interrupted)?),
        false => None,
    };
    let context = || {
        format!(
            "{} test against {}{}",
            spec.workload,
            if iperf3 { "the iperf3 server " } else { "" },
            super::address::display(&target.host, target.port)
        )
    };
    let outcome = if iperf3 {
        let interrupted = options.interrupted;
        let mut trial = |number: u32| {
            crate::iperf3::client::run(
                &target,
                iperf3_auth.as_ref(),
                spec,
                crate::session::RunOptions {
                    interrupted,
                    settings: Default::default(),
                    on_interval: on_interval(),
                    on_progress: None,
                    trial: number,
                },
            )
        };
        repeat::run_trials(&mut trial, options)
    } else {
        trials::run_case_adjusted(&target, spec, options, &on_interval, on_progress, adjust, settings)
    };
    let mut run = match outcome {
        Ok(run) => run,
        Err(failure) => {
            // Trials that finished before the failing one are results:
            // show them, then fail with the error.
            if let Some(mut run) = failure.finished {
                annotate_with_path(&mut run, m, true);
                log::warn!(
                    "a trial failed after {} finished; those are shown, marked interrupted",
                    run.trials.len()
                );
                if terminal {
                    let _ = print(m, &run);
                }
            }
            return Err(anyhow::Error::new(failure.error)).with_context(context);
        }
    };
    annotate_with_path(&mut run, m, false);
    if let Some(alone) = alone {
        super::multilink::apply_alone(&mut run, &alone, m);
    }
    Ok(Measured { run, saver })
}

/// A trial's live interval lines (`-i`), under their column header, which
/// comes before the first of them; the header's choice of columns (a TCP
/// sender's or not) holds for every line after it.
fn live_interval_lines(
    tick: &IntervalTick,
    header: &std::sync::OnceLock<bool>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut first = false;
    let tcp = *header.get_or_init(|| {
        first = true;
        interval_has_tcp(tick)
    });
    if first {
        writeln!(out, "{}", interval_header(tcp))?;
    }
    interval_lines("client", tick, tcp, out)
}

/// Prints a run in the format `m` asks for.
/// Buffered: stdout is line-buffered, and a pretty JSON document of a
/// test with many intervals was one write(2) per line (12,244 for a 1 s
/// `rr --crr`).
pub fn print(m: &MeasureArgs, run: &RunResult) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let written = if m.json_stream {
        StreamEvent::Result { result: run }.write_line(&mut out)
    } else if m.json {
        Json.render(run, &mut out)
    } else {
        Text.render(run, &mut out)
    };
    super::stdout::closed_pipe_is_the_end(written.and_then(|_| out.flush()), "writing the result")
}

#[cfg(test)]
mod live_tests {
    use super::*;
    use crate::model::{IntervalTcp, Role};
    use crate::workload::runner::TickStream;
    use std::sync::OnceLock;

    fn tick(start: f64, streams: &[(u32, Role, u64, Option<IntervalTcp>)]) -> IntervalTick {
        IntervalTick {
            start_seconds: start,
            end_seconds: start + 1.0,
            omitted: false,
            streams: streams
                .iter()
                .map(|&(stream_id, role, bytes, tcp)| TickStream {
                    stream_id,
                    role,
                    bytes,
                    tcp,
                })
                .collect(),
        }
    }

    /// Two ticks' lines under their header, with each column's right edge
    /// in the header checked against the values under it.
    fn lines_under_one_header(streams: &[(u32, Role, u64, Option<IntervalTcp>)]) -> Vec<String> {
        let header = OnceLock::new();
        let mut out = Vec::new();
        live_interval_lines(&tick(0.0, streams), &header, &mut out).unwrap();
        live_interval_lines(&tick(1.0, streams), &header, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        assert_eq!(text.matches("transfer").count(), 1, "{text}");
        assert_eq!(lines.len(), 1 + 2 * 3, "{text}");
        let head = &lines[0];
        let edge = |name: &str| head.find(name).unwrap() + name.len();
        for line in &lines[1..] {
            assert!(line[..edge("rate")].ends_with("bit/s"), "{line:?} under {head:?}");
            assert!(line[..edge("transfer")].ends_with('B'), "{line:?} under {head:?}");
            assert!(line[edge("transfer")..].starts_with(' '), "{line:?}");
        }
        lines
    }

    /// Regression: with `-i 1` the interval lines came before any header
    /// (the report's header only at the end).
    #[test]
    fn live_interval_lines_come_under_one_header_aligned_with_their_columns() {
        let lines = lines_under_one_header(&[
            (1, Role::Receiver, 1_250_000_000, None),
            (2, Role::Receiver, 5_000, None),
        ]);
        assert_eq!(lines[0], interval_header(false));
        assert!(!lines[0].contains("retr"), "{lines:?}");
    }

    /// Regression (issue 43): the interval lines carried no retransmits or
    /// congestion window, which iperf3's do. A TCP sender's lines carry
    /// its retransmits in the interval, its window and round trip; the SUM
    /// line sums the retransmits.
    #[test]
    fn a_tcp_senders_interval_lines_carry_retransmits_cwnd_and_rtt() {
        let tcp = |retransmits, cwnd, rtt| {
            Some(IntervalTcp {
                retransmits,
                congestion_window_bytes: cwnd,
                rtt_us: rtt,
            })
        };
        let lines = lines_under_one_header(&[
            (1, Role::Sender, 1_250_000_000, tcp(3, 4 << 20, 234)),
            (2, Role::Sender, 5_000, tcp(4, 64 << 10, 1500)),
        ]);
        assert_eq!(lines[0], interval_header(true));
        let head = &lines[0];
        let edge = |name: &str| head.find(name).unwrap() + name.len();
        assert!(lines[1][..edge("retr")].ends_with(" 3"), "{lines:?}");
        assert!(lines[1][..edge("cwnd")].ends_with("4.19 MB"), "{lines:?}");
        assert!(lines[1][..edge("rtt")].ends_with("234 us"), "{lines:?}");
        assert!(lines[2][..edge("cwnd")].ends_with("65.54 kB"), "{lines:?}");
        assert!(lines[3].starts_with("[SUM]"), "{lines:?}");
        assert!(lines[3][..edge("retr")].ends_with(" 7"), "{lines:?}");
        assert!(lines[1].ends_with("client sent"), "{lines:?}");
    }
}
