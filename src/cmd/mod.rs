//! One function per subcommand: turn parsed arguments into a validated
//! configuration, run it, print the result. Errors carry context for the
//! user; `main` prints the chain once and exits with [`exit_code`].

pub use crate::address;
pub mod compare;
pub mod demo;
pub mod diff;
pub mod export;
pub mod failure;
pub mod files;
pub mod host;
pub mod import;
pub mod lab;
pub mod linerate;
pub mod links;
pub mod manual;
pub mod measure;
pub mod mesh;
pub mod plot;
pub mod rr;
pub mod run;
pub mod runs;
pub mod save;
pub mod serve;
pub mod serve_metrics;
pub mod signals;
pub mod sweep;
pub mod tcp;
pub mod udp;
pub mod watch;

use crate::cli::{Cli, Command, LogFormat};
use crate::logging;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let level = match (cli.log.quiet, cli.log.verbose) {
        (true, _) => log::LevelFilter::Error,
        (_, 0) => log::LevelFilter::Warn,
        (_, 1) => log::LevelFilter::Info,
        _ => log::LevelFilter::Debug,
    };
    let format = match cli.log.log_format {
        LogFormat::Text => logging::Format::Text,
        LogFormat::Json => logging::Format::Json,
    };
    logging::init(level, format);
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Tcp(args) => tcp::run(*args),
        Command::Sweep(args) => sweep::run(*args),
        Command::Udp(args) => udp::run(*args),
        Command::Rr(args) => rr::run(*args),
        Command::Files(args) => files::run(*args),
        Command::Watch(args) => watch::run(*args),
        Command::Demo(args) => demo::run(args),
        Command::Host(args) => host::run(args),
        Command::Linerate(args) => linerate::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Run(args) => run::run(args),
        Command::Mesh(args) => mesh::run(*args),
        Command::Man(args) => manual::man(args),
        Command::Completions(args) => manual::completions(args),
        Command::Runs(args) => runs::runs(args),
        Command::Show(args) => runs::show(args),
        Command::Compare(args) => compare::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Export(args) => export::export(args),
        Command::Rm(args) => export::rm(args),
        Command::Import(args) => import::run(args),
        Command::Plot(args) => plot::plot(*args),
        Command::Report(args) => plot::report(args),
    }
}

/// Options that are each valid but make no sense together, or a name
/// (metric, column) that does not exist: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Exit codes (also in the README):
/// 0 success, 1 other failure, 2 invalid options, 3 agent unreachable,
/// 4 agent refused (busy, limits, version), 5 the test failed while running,
/// 6 the run was cut short (result printed, marked interrupted), 7 no
/// such run or no run matched, 8 the results database failed (a measured
/// result was still printed and written to a JSON file),
/// 130 interrupted before any result.
pub fn exit_code(error: &anyhow::Error) -> i32 {
    for cause in error.chain() {
        if let Some(e) = cause.downcast_ref::<watch::CommandExit>() {
            return e.0;
        }
        if let Some(e) = cause.downcast_ref::<crate::store::StoreError>() {
            return match e {
                crate::store::StoreError::NoSuchRun(_) | crate::store::StoreError::NothingMatched(_) => 7,
                _ => 8,
            };
        }
        if cause.downcast_ref::<UsageError>().is_some() {
            return 2;
        }
        if let Some(crate::store::import::ImportError::Malformed { .. }) = cause.downcast_ref() {
            return 2;
        }
        if cause.downcast_ref::<measure::CutShort>().is_some() {
            return measure::CutShort::EXIT_CODE;
        }
        if let Some(e) = cause.downcast_ref::<crate::session::SessionError>() {
            return e.exit_code();
        }
        if cause.downcast_ref::<crate::workload::SpecError>().is_some() {
            return 2;
        }
        if cause.downcast_ref::<crate::plan::PlanError>().is_some() {
            return 2;
        }
        if let Some(e) = cause.downcast_ref::<run::PlanStopped>() {
            return e.exit_code();
        }
        if cause.downcast_ref::<crate::linerate::LineRateError>().is_some() {
            return 2;
        }
        if let Some(e) = cause.downcast_ref::<crate::lab::LabError>() {
            return match e {
                crate::lab::LabError::Invalid { .. } | crate::lab::LabError::NotFound { .. } => 2,
                _ => 1,
            };
        }
    }
    1
}

/// The measurement a command asks for: its shared options and test spec.
/// The one place that knows which commands measure.
pub fn measurement_of(command: &Command) -> Option<(crate::cli::MeasureArgs, crate::model::TestSpec)> {
    match command {
        Command::Tcp(args) => tcp::spec(args).ok().map(|spec| (args.measure.clone(), spec)),
        Command::Sweep(args) => sweep::spec(args).ok().map(|spec| (args.measure.clone(), spec)),
        Command::Udp(args) => udp::spec(args).ok().map(|spec| (args.measure.clone(), spec)),
        Command::Rr(args) => rr::spec(args).ok().map(|spec| (args.measure.clone(), spec)),
        Command::Files(args) => files::spec(args).ok().map(|spec| (args.measure.clone(), spec)),
        Command::Serve(_) | Command::Demo(_) | Command::Lab(_) | Command::Run(_) | Command::Mesh(_) => None,
        Command::Watch(_) => None,
        Command::Host(_) | Command::Linerate(_) | Command::Man(_) | Command::Completions(_) => None,
        Command::Runs(_)
        | Command::Show(_)
        | Command::Compare(_)
        | Command::Diff(_)
        | Command::Export(_)
        | Command::Rm(_)
        | Command::Import(_) => None,
        Command::Plot(_) | Command::Report(_) => None,
    }
}
