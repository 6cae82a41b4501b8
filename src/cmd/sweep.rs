//! `nicbench sweep`: options to a sweep spec, a progress bar on stderr
//! (a plain line per pass when stderr is not a terminal), and table, CSV or JSON out.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::bail;
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::SweepArgs;
use crate::workload::runner::{Progress, ProgressCallback};
use crate::workload::sweep::result::{SweepResult, KEY};
use crate::workload::sweep::text::csv;

pub fn run(args: SweepArgs) -> anyhow::Result<()> {
    let spec = args.measure.spec_with(&args.options)?;
    let m = &args.measure;
    if !m.spec.omit.is_zero() {
        bail!("-O/--omit does not apply to a sweep: every size starts with an untimed warm-up exchange");
    }
    if m.spec.interval.is_some() {
        bail!("-i/--interval does not apply to a sweep: it reports one line per size instead");
    }
    let show = log::log_enabled!(log::Level::Warn);
    let measured = super::measure::measure(m, &spec, &move || show.then(progress_display))?;
    // Stopped early (Ctrl-C, the agent): printed and saved like any other
    // cut-short run, and the exit code says so.
    super::measure::conclude(measured, |measured| {
        if !args.csv {
            return super::measure::finish(m, measured);
        }
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let sweeps = measured
            .run
            .result
            .streams
            .iter()
            .filter_map(|s| s.sender.extras.get::<SweepResult>(KEY));
        for sweep in sweeps {
            super::stdout::closed_pipe_is_the_end(csv(&sweep, &mut out).and_then(|_| out.flush()), "writing the CSV")?;
        }
        super::measure::save(measured.saver, &measured.run, None, false)
    })
}

/// A progress bar when stderr is a terminal, else a plain line per pass.
fn progress_display() -> ProgressCallback {
    if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("sweep [{bar:30}] {pos}/{len} (sizes x passes), {elapsed} elapsed  {msg}")
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
        // A log, not a bar: one line per pass, not per size.
        Arc::new(|p: &Progress| {
            if p.ends_pass {
                let _ = writeln!(std::io::stderr().lock(), "sweep [{}/{}] {}", p.done, p.total, p.message);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};
    use crate::workload::sweep::SweepParams;

    /// The command line's defaults (clap takes them as text) are the
    /// workload's: a plain `nicbench sweep HOST` asks for what
    /// `SweepParams::default()` documents.
    #[test]
    fn command_line_defaults_are_the_workload_defaults() {
        let cli = Cli::try_parse_from(["nicbench", "sweep", "127.0.0.1"]).unwrap();
        let Command::Sweep(args) = cli.command else {
            panic!("not a sweep");
        };
        let params: SweepParams = args.measure.spec_with(&args.options).unwrap().params().unwrap();
        let defaults = SweepParams::default();
        assert_eq!(params.point_seconds, defaults.point_seconds);
        assert_eq!(params.passes, defaults.passes);
        assert_eq!(params, defaults);
    }
}
