//! Every measuring command (`nicbench tcp`, `udp`, `rr`, `sweep`, `files`,
//! `loaded`, one per registered workload): its spec, the workload's part
//! around the run ([`Around`]: options it refuses, preparing the host, a
//! progress bar, a companion trial every trial is read against, warnings,
//! its own CSV), the run, and the chosen output. Nothing here names a
//! workload.

use std::cell::OnceCell;
use std::io::{IsTerminal, Write};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};

use super::measure::{Audience, Measured};
use super::{measure, signals};
use crate::cli::{MeasureArgs, Measurement};
use crate::model::{RunResult, TestSpec};
use crate::session::{self, RunOptions};
use crate::workload::args::{Around, Companion};
use crate::workload::runner::{Progress, ProgressCallback};
use crate::workload::Settings;

/// Runs one measuring command.
pub fn run(command: Measurement) -> anyhow::Result<()> {
    measure_for(command, Audience::Terminal).map(|_| ())
}

/// How a measuring command ended: its run, and the run's id in the store
/// (None with `--no-save`).
pub struct Ended {
    pub run: RunResult,
    pub run_id: Option<i64>,
}

/// Runs one measuring command for `audience`: the terminal (the command
/// itself), or a plan running it as a case, which gets the run and its id
/// and prints nothing of it. A run cut short is saved and fails with
/// [`measure::CutShort`].
pub fn measure_for(command: Measurement, audience: Audience) -> anyhow::Result<Ended> {
    let terminal = matches!(audience, Audience::Terminal);
    let spec = command.spec()?;
    let mut around = command.around()?;
    let m = &command.measure;
    // A shared option this workload cannot honour is a usage error (exit 2).
    around.refuse(&m.spec).map_err(super::UsageError)?;
    signals::install();
    let mut settings = crate::workload::Settings::default();
    around.prepare(&spec, &mut settings)?;
    let around = &*around;
    let show = terminal && log::log_enabled!(log::Level::Warn);
    let progress = around
        .progress_unit()
        .filter(|_| show)
        .map(|unit| (command.workload, unit));
    let on_progress = move || progress.map(|(name, unit)| progress_display(name, unit));
    // Run once, when the first trial has ended (the agent accepted the
    // test): every trial is read against it.
    let companion: OnceCell<Option<RunResult>> = OnceCell::new();
    let adjust = |run: &mut RunResult| {
        let companion = companion
            .get_or_init(|| {
                let wanted = around.companion(&spec)?;
                if signals::client_stop_reason().is_some() {
                    return None;
                }
                run_companion(m, &wanted, around, &settings, terminal)
            })
            .as_ref();
        let mut changed = around.adjust(&mut run.result, companion);
        for trial in &mut run.trials {
            changed |= around.adjust(trial, companion);
        }
        if changed {
            crate::verdict::annotate_link(run, m.link_speed, m.link_overhead);
        }
    };
    let measured = measure::measure(m, &spec, &on_progress, &adjust, &settings, audience)?;
    for caution in around.cautions(&measured.run) {
        log::warn!("{caution}");
    }
    // Stopped early (Ctrl-C, the agent): printed and saved like any other
    // cut-short run, and the exit code says so.
    measure::conclude(measured, |Measured { run, saver }| {
        let run_id = match audience {
            Audience::Plan(_) => saver.finish(&run, None)?.map(|saved| saved.id),
            Audience::Terminal => {
                let stdout = std::io::stdout();
                let mut out = stdout.lock();
                match around.csv(&run, &mut out) {
                    None => measure::finish(m, &run, saver)?,
                    Some(written) => {
                        super::stdout::closed_pipe_is_the_end(written, "writing the CSV")?;
                        measure::save(saver, &run, None, false)?
                    }
                }
            }
        };
        Ok(Ended { run, run_id })
    })
}

/// The companion trial, on the same path; a failure is said and leaves the
/// trials unread against it.
fn run_companion(
    m: &MeasureArgs,
    wanted: &Companion,
    around: &dyn Around,
    settings: &Settings,
    terminal: bool,
) -> Option<RunResult> {
    match companion_trial(m, &wanted.spec, settings) {
        Ok(run) => {
            if terminal && log::log_enabled!(log::Level::Warn) {
                eprintln!("{}", around.companion_ran(&run));
            }
            Some(run)
        }
        Err(e) => {
            log::warn!("{} failed ({e:#}): {}", wanted.what, wanted.unread);
            None
        }
    }
}

fn companion_trial(m: &MeasureArgs, spec: &TestSpec, settings: &Settings) -> anyhow::Result<RunResult> {
    let target = measure::target(m)?;
    // The agent may still be closing the trial just before.
    let run = super::trials::retry_while_busy(true, || {
        session::run(
            &target,
            spec,
            RunOptions {
                interrupted: &signals::client_stop_reason,
                on_interval: None,
                on_progress: None,
                trial: 1,
                settings: settings.clone(),
            },
        )
    })?;
    Ok(run)
}

/// A progress bar when stderr is a terminal, else a plain line per pass.
fn progress_display(name: &'static str, unit: &'static str) -> ProgressCallback {
    if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{name} [{{bar:30}}] {{pos}}/{{len}} ({unit}), {{elapsed}} elapsed  {{msg}}"
            ))
            .expect("a valid template")
            .progress_chars("=> "),
        );
        Arc::new(move |p: &Progress| {
            bar.set_length(p.total);
            bar.set_position(p.done);
            bar.set_message(p.message.clone());
            if p.done == p.total {
                bar.finish_and_clear();
            }
        })
    } else {
        // A log, not a bar: one line per pass, not per step.
        Arc::new(move |p: &Progress| {
            if p.ends_pass {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "{name} [{}/{}] {}",
                    p.done,
                    p.total,
                    p.message
                );
            }
        })
    }
}
