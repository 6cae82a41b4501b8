//! One function per subcommand: turn parsed arguments into a validated
//! configuration, run it, print the result. Errors carry context for the
//! user; `main` prints the chain once and exits with [`exit_code`].

pub use crate::address;
pub mod chart;
pub mod compare;
pub mod db;
pub mod demo;
pub mod diff;
pub mod export;
pub mod failure;
pub mod fanout;
pub mod host;
pub mod import;
pub mod lab;
pub mod linerate;
pub mod manual;
pub mod measure;
pub mod measuring;
pub mod mesh;
pub mod multilink;
pub mod run;
pub mod runs;
pub mod save;
pub mod serve;
pub mod serve_metrics;
pub mod signals;
pub mod stdout;
pub mod switch;
pub mod trials;
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
        Command::Measure(command) => measuring::run(*command),
        Command::Watch(args) => watch::run(*args),
        Command::Demo(args) => demo::run(args),
        Command::Host(args) => host::run(args),
        Command::Linerate(args) => linerate::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Run(args) => run::run(args),
        Command::Mesh(args) => mesh::run(*args),
        Command::Fanout(command) => fanout::run(*command),
        Command::Man(args) => manual::man(args),
        Command::Completions(args) => manual::completions(args),
        Command::Runs(args) => runs::runs(args),
        Command::Show(args) => runs::show(args),
        Command::Compare(args) => compare::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Export(args) => export::export(args),
        Command::Rm(args) => export::rm(args),
        Command::Import(args) => import::run(args),
        Command::Db(args) => db::run(args),
        Command::Plot(args) => chart::plot(*args),
        Command::Report(args) => chart::report(args),
    }
}

/// Options that are each valid but make no sense together, or a name
/// (metric, column) that does not exist: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A [`UsageError`] that is a list (each invalid case of a plan): on
/// stderr the head, then each item on its own line, then the hint; where
/// an error must be one line (JSON, a plan's summary) the items are joined
/// with "; ". Each item is escaped as any cause (`outside_text::terminal`),
/// so only the lines nicbench makes are broken. Exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{head} {}; {hint}", items.join("; "))]
pub struct UsageList {
    /// Ends with a colon: "1 of 4 cases are not valid command lines:".
    pub head: String,
    pub items: Vec<String>,
    /// What to do: "fix the options, or ...".
    pub hint: String,
}

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
                crate::store::StoreError::NoSuchRun { .. } | crate::store::StoreError::NothingMatched(_) => 7,
                _ => 8,
            };
        }
        if cause.downcast_ref::<UsageError>().is_some() || cause.downcast_ref::<UsageList>().is_some() {
            return 2;
        }
        if cause.downcast_ref::<mesh::HostsLeftOut>().is_some() {
            return 3;
        }
        if let Some(
            crate::store::import::ImportError::Malformed { .. }
            | crate::store::import::ImportError::Invalid { .. }
            | crate::store::import::ImportError::TooLarge { .. },
        ) = cause.downcast_ref()
        {
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

/// The measurement a measuring command line asks for (program name
/// first): its shared options and test spec, converted by its workload's
/// registry entry. Options that do not parse are a [`UsageError`] with
/// clap's first line; a command that is not a measurement is one too.
pub fn measurement<I, T>(argv: I) -> anyhow::Result<(crate::cli::MeasureArgs, crate::model::TestSpec)>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    let usage = |e: clap::Error| UsageError(crate::workload::args::first_line(&e.to_string()));
    let matches = Cli::command().try_get_matches_from(argv).map_err(usage)?;
    let Some((name, options)) = matches.subcommand() else {
        return Err(UsageError("no command given".into()).into());
    };
    let workload =
        crate::workload::find(name).map_err(|_| UsageError(format!("'{name}' is not a measuring command")))?;
    let measure = crate::cli::MeasureArgs::from_arg_matches(options).map_err(usage)?;
    Ok((measure, workload.command_line().spec(options)?))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every registered workload is a measuring command whose command line
    /// the registry turns into its spec: the one conversion the typed
    /// commands, plans, the mesh and /probe share.
    #[test]
    fn every_registered_workload_converts_its_command_line_into_its_spec() {
        let cli = Cli::command();
        for w in crate::workload::REGISTRY {
            assert!(cli.find_subcommand(w.name()).is_some(), "no `nicbench {}`", w.name());
            if !w.measuring_command() {
                // A fan-out command (tested with its CLI): its agents are read by its view.
                assert!(w.fanout().is_some(), "{} has no view of its agents", w.name());
                continue;
            }
            let mut argv = vec!["nicbench", w.name(), "127.0.0.1", "-P", "1"];
            // The one workload that cannot run without naming its input.
            if w.name() == "files" {
                argv.extend(["--generate", "2x1K"]);
            }
            let (measure, spec) = measurement(&argv).unwrap_or_else(|e| panic!("{}: {e:#}", w.name()));
            assert_eq!((spec.workload.as_str(), measure.host.as_str()), (w.name(), "127.0.0.1"));
            crate::workload::args::check(&spec).unwrap_or_else(|e| panic!("{}: {e}", w.name()));
            assert!(w.estimated_seconds(&spec) > 0.0, "{}", w.name());
            // 32 KiB: a size every workload takes (a UDP datagram stops at 65507 B).
            if let Some(message) = w.command_line().message_option("32K") {
                argv.extend(message.iter().map(String::as_str));
                let (_, sized) = measurement(&argv).unwrap_or_else(|e| panic!("{}: {e:#}", w.name()));
                assert_eq!(sized.message_bytes, 32768, "{}", w.name());
            }
        }
    }

    /// The command line's defaults (clap takes them as text) are the
    /// workload's: a plain `nicbench sweep HOST` asks for what
    /// `SweepParams::default()` documents. Parsed as the binary parses it,
    /// into the measuring command the registry built.
    #[test]
    fn command_line_defaults_are_the_workload_defaults() {
        use clap::Parser;

        use crate::workload::sweep::SweepParams;
        let cli = Cli::try_parse_from(["nicbench", "sweep", "127.0.0.1"]).unwrap();
        let Command::Measure(command) = cli.command else {
            panic!("not a measuring command");
        };
        assert_eq!(
            (command.workload, command.measure.host.as_str()),
            ("sweep", "127.0.0.1")
        );
        let params: SweepParams = command.spec().unwrap().params().unwrap();
        let defaults = SweepParams::default();
        assert_eq!(params.point_seconds, defaults.point_seconds);
        assert_eq!(params.passes, defaults.passes);
        assert_eq!(params, defaults);
    }

    /// Errors of the workload's own options are the caller's to see, not
    /// dropped: a value the workload refuses, and a command that is not a
    /// measurement.
    #[test]
    fn a_command_line_that_is_no_measurement_is_an_error_with_its_reason() {
        let e = measurement(["nicbench", "udp", "127.0.0.1", "-b", "0"]).unwrap_err();
        assert!(
            e.downcast_ref::<UsageError>().unwrap().0.contains("at least 1 bit/s"),
            "{e}"
        );
        let e = measurement(["nicbench", "files", "127.0.0.1", "--from", "/nonexistent/nicbench"]).unwrap_err();
        assert!(e.to_string().contains("--from /nonexistent/nicbench"), "{e}");
        let e = measurement(["nicbench", "runs"]).unwrap_err();
        assert!(e.to_string().contains("'runs' is not a measuring command"), "{e}");
    }

    /// A plan's cases are checked with the CLI's grammar, which `nicbench
    /// run` hands to the plan (the plan does not import the CLI).
    mod plan_cases {
        use std::path::Path;

        use clap::CommandFactory;

        use crate::cli::Cli;
        use crate::plan::file::Plan;
        use crate::plan::matrix::{estimate, expand};

        fn grammar() -> clap::Command {
            Cli::command()
        }

        fn plan(text: &str) -> Plan {
            Plan::parse(text, Path::new("p.toml")).unwrap_or_else(|e| panic!("{e}"))
        }

        const AGENTS: &str =
            "[[agents]]\nlabel = \"a\"\naddress = \"127.0.0.1:5999\"\n[[agents]]\nlabel = \"b\"\naddress = \"[::1]:5998\"\n";

        #[test]
        fn defaults_and_workload_options_go_on_every_command_line_but_a_sweep_keeps_its_limit() {
            let p = plan(&format!(
                "{AGENTS}[defaults]\nduration = \"5s\"\nomit = \"1s\"\nrepeat = 3\npick = \"best\"\nwait = \"1m\"\n\
                 options = [\"-w\", \"4M\"]\n[workloads.sweep]\noptions = [\"--max\", \"1M\", \"-t\", \"2m\"]\n\
                 [matrix]\nworkload = [\"tcp\", \"sweep\"]\nagent = [\"b\"]\n"
            ));
            let cases = expand(&p).unwrap();
            assert_eq!(
                cases[0].command_line(&p).join(" "),
                "tcp [::1]:5998 -t 5s -O 1s --repeat 3 --pick best --wait 1m -w 4M"
            );
            assert_eq!(
                cases[1].command_line(&p).join(" "),
                "sweep [::1]:5998 --repeat 3 --pick best --wait 1m -w 4M --max 1M -t 2m"
            );
            let tcp = cases[0].checked(&p, &grammar()).unwrap();
            // 3 trials of 6 s plus the overheads.
            assert_eq!(tcp.trials, 3);
            let e = tcp.estimate.as_secs_f64();
            assert!((18.0..22.0).contains(&e), "{e}");
            let sweep = cases[1].checked(&p, &grammar()).unwrap();
            assert!(sweep.estimate.as_secs_f64() < 3.0 * 120.0 + 5.0);
        }

        /// Regression: a plan giving `--repeat 5` as a workload's option was
        /// estimated at one trial per case (1 min 21 s for a plan that took 5
        /// min). The trials come from the case's whole command line: the
        /// workload's options, a `vary` axis, `--iterations`; a files case
        /// adds its raw TCP trial once.
        #[test]
        fn the_estimate_counts_the_repetitions_wherever_the_plan_asks_for_them() {
            let p = plan(&format!(
                "{AGENTS}[defaults]\nduration = \"2s\"\n\
                 [workloads.tcp]\noptions = [\"--repeat\", \"5\"]\n\
                 [workloads.rr]\noptions = [\"--confidence\", \"99,5\", \"--iterations\", \"7,3\"]\n\
                 [workloads.files]\noptions = [\"--generate\", \"2x1K\", \"--raw-time\", \"4s\", \"--repeat\", \"2\"]\n\
                 [matrix]\nworkload = [\"tcp\", \"rr\", \"files\", \"udp\"]\nagent = [\"a\"]\n"
            ));
            let checked: Vec<_> = expand(&p)
                .unwrap()
                .iter()
                .map(|c| (c.workload.clone(), c.checked(&p, &grammar()).unwrap()))
                .collect();
            let trials: Vec<(&str, u32)> = checked.iter().map(|(w, c)| (w.as_str(), c.trials)).collect();
            assert_eq!(trials, [("tcp", 5), ("rr", 7), ("files", 2), ("udp", 1)]);
            for (workload, c) in &checked {
                let one = estimate(&c.spec, 1, 0.0);
                // The raw TCP trial of 4 s; estimate() adds its overhead.
                let before = if workload == "files" { 4.0 } else { 0.0 };
                let expected = estimate(&c.spec, c.trials, before);
                assert_eq!(c.estimate, expected, "{workload}");
                if c.trials > 1 {
                    assert!(c.estimate > one * 2, "{workload}: {:?} against {:?}", c.estimate, one);
                }
            }
            // 5 trials of 2 s, their overheads, and the case's.
            let tcp = checked[0].1.estimate.as_secs_f64();
            assert!((5.0 * 2.6 + 0.4 - 0.01..5.0 * 2.6 + 0.4 + 0.01).contains(&tcp), "{tcp}");
        }

        /// Regression: `files -t 2` was ignored silently (its option is
        /// --raw-time); refused now, while a plan's default duration still
        /// leaves files cases valid.
        #[test]
        fn files_refuses_t_on_its_command_line_and_plans_do_not_hand_it_their_duration() {
            let typed = grammar().try_get_matches_from(["nicbench", "files", "h", "--generate", "2x1K", "-t", "2"]);
            let (name, options) = typed.as_ref().unwrap().subcommand().unwrap();
            let e = crate::workload::args::spec_of_matches(name, options)
                .unwrap_err()
                .to_string();
            assert!(e.contains("-t") && e.contains("--raw-time"), "{e}");
            let p = plan(&format!(
                "{AGENTS}[defaults]\nduration = \"5s\"\n[workloads.files]\noptions = [\"--generate\", \"2x1K\"]\n\
                 [matrix]\nworkload = [\"files\", \"tcp\"]\nagent = [\"a\"]\n"
            ));
            let cases = expand(&p).unwrap();
            assert_eq!(
                cases[0].command_line(&p).join(" "),
                "files 127.0.0.1:5999 --generate 2x1K"
            );
            assert_eq!(cases[1].command_line(&p).join(" "), "tcp 127.0.0.1:5999 -t 5s");
            for c in &cases {
                c.check(&p, &grammar()).unwrap();
            }
        }

        #[test]
        fn a_cell_that_is_not_a_valid_command_line_is_found_before_any_traffic() {
            let p = plan(&format!(
                "{AGENTS}[matrix]\nworkload = [\"rr\"]\nagent = [\"a\"]\ndirection = [\"reverse\"]\n"
            ));
            let cases = expand(&p).unwrap();
            let e = cases[0].check(&p, &grammar()).unwrap_err();
            assert!(e.contains("--reverse"), "{e}");
            let p = plan(&format!(
                "{AGENTS}[workloads.tcp]\noptions = [\"--frobnicate\"]\n[matrix]\nworkload = [\"tcp\"]\n"
            ));
            let e = expand(&p).unwrap()[0].check(&p, &grammar()).unwrap_err();
            assert!(e.contains("--frobnicate"), "{e}");
        }

        #[test]
        fn the_message_axis_is_a_request_size_for_rr_and_does_not_apply_to_a_sweep() {
            let p = plan(&format!(
                "{AGENTS}[matrix]\nworkload = [\"rr\", \"sweep\"]\nagent = [\"a\"]\nmessage = [\"1\", \"64K\"]\n"
            ));
            let cases = expand(&p).unwrap();
            let lines: Vec<String> = cases.iter().map(|c| c.command_line(&p).join(" ")).collect();
            assert_eq!(
                lines,
                [
                    "rr 127.0.0.1:5999 -r 1,1",
                    "rr 127.0.0.1:5999 -r 64K,64K",
                    "sweep 127.0.0.1:5999"
                ],
                "{lines:#?}"
            );
            for c in &cases {
                c.check(&p, &grammar()).unwrap();
            }
        }

        #[test]
        fn every_example_plan_is_valid_in_every_cell() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
            let mut seen = 0;
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "toml") {
                    let p = Plan::load(&path).unwrap_or_else(|e| panic!("{e}"));
                    for c in expand(&p).unwrap() {
                        c.check(&p, &grammar())
                            .unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), c.key()));
                    }
                    seen += 1;
                }
            }
            assert!(seen >= 3, "examples/*.toml: {seen}");
        }
    }
}
