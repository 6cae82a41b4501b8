//! How a failed command ends: the error chain on stderr, once, each cause
//! a line; with `--json` or `--json-stream` also one JSON error document
//! on stdout, so a script always gets JSON; and a suggestion for a
//! mistyped subcommand that clap's own similarity misses (`tpc`).

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use serde::Serialize;

/// Schema string of the error document.
pub const ERROR_SCHEMA: &str = "nicbench.error/1";

/// The error document `--json` prints on failure.
#[derive(Debug, Serialize)]
pub struct ErrorDocument {
    pub schema: &'static str,
    pub error: ErrorBody,
}

#[derive(Debug, Serialize)]
pub struct ErrorBody {
    /// The class of failure, from the exit code (README "Exit codes").
    pub kind: &'static str,
    /// The whole message, causes joined with ": ".
    pub message: String,
    pub exit_code: i32,
    /// What the client found stalled the test, when it could tell: the
    /// verdict of a test that produced no result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<FailureVerdict>,
}

/// The verdict of a failed test: its kind (`path_mtu_black_hole`) and the
/// sentence that says it.
#[derive(Debug, Serialize)]
pub struct FailureVerdict {
    pub kind: &'static str,
    pub summary: String,
}

/// The verdict a failure carries: a path-MTU black hole the client found
/// when the test stalled.
pub fn verdict_of(error: &anyhow::Error) -> Option<FailureVerdict> {
    error
        .chain()
        .find_map(|cause| match cause.downcast_ref::<crate::side_runner::TrialError>() {
            Some(crate::side_runner::TrialError::PathBlackHole(summary)) => Some(FailureVerdict {
                kind: "path_mtu_black_hole",
                summary: crate::outside_text::terminal(summary).into_owned(),
            }),
            _ => None,
        })
}

/// The word for an exit code.
pub fn kind_of(exit_code: i32) -> &'static str {
    match exit_code {
        2 => "invalid_options",
        3 => "agent_unreachable",
        4 => "agent_refused",
        5 => "test_failed",
        6 => "interrupted",
        _ => "failed",
    }
}

impl ErrorDocument {
    pub fn new(lines: &[String], exit_code: i32) -> ErrorDocument {
        ErrorDocument {
            schema: ERROR_SCHEMA,
            error: ErrorBody {
                kind: kind_of(exit_code),
                message: lines.join(": "),
                exit_code,
                verdict: None,
            },
        }
    }
}

/// The message and its causes, each once: a cause whose words the line
/// before already holds (thiserror's `{source}` in the message) is left out.
/// A cause may quote a peer (its error message, its host name): controls
/// and bidi overrides are shown escaped (`outside_text::terminal`).
pub fn lines(error: &anyhow::Error) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = crate::outside_text::terminal(&cause.to_string()).into_owned();
        if out.last().is_some_and(|previous| previous.contains(&text)) {
            continue;
        }
        out.push(text);
    }
    out
}

/// The message and its causes on one line, each once (see [`lines`]):
/// where an error is shown inside other output (a plan's dry run, a report
/// it could not make). `{:#}` would repeat a cause thiserror's `{source}`
/// already put in the message.
pub fn one_line(error: &anyhow::Error) -> String {
    lines(error).join(": ")
}

/// True when the command line asks for JSON output (before any `--`).
pub fn wants_json(args: &[OsString]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--json" || a == "--json-stream")
}

/// Prints a failed command's error and returns its exit code.
pub fn report(error: &anyhow::Error, json: bool) -> i32 {
    let code = super::exit_code(error);
    let lines = lines(error);
    match error.downcast_ref::<super::UsageList>() {
        Some(list) => {
            let terminal = |text: &str| crate::outside_text::terminal(text).into_owned();
            super::stdout::err_line(format_args!("nicbench: error: {}", terminal(&list.head)));
            for item in &list.items {
                super::stdout::err_line(format_args!("  {}", terminal(item)));
            }
            super::stdout::err_line(format_args!("{}", terminal(&list.hint)));
        }
        None => {
            super::stdout::err_line(format_args!("nicbench: error: {}", lines[0]));
            for cause in &lines[1..] {
                super::stdout::err_line(format_args!("  caused by: {cause}"));
            }
        }
    }
    // A cut-short run has printed its (marked) result document already, and
    // so has `watch` whose command failed (its status is the exit code).
    let printed = error
        .chain()
        .any(|c| c.downcast_ref::<super::watch::CommandExit>().is_some());
    if json && code != super::measure::CutShort::EXIT_CODE && !printed {
        let mut doc = ErrorDocument::new(&lines, code);
        doc.error.verdict = verdict_of(error);
        print_json(&doc);
    }
    code
}

/// Prints a command-line error (clap's) and exits: with `--json`, also as
/// a JSON error document; a mistyped subcommand gets a suggestion.
pub fn exit_on_usage_error(mut error: clap::Error, command: &clap::Command, args: &[OsString]) -> ! {
    if error.kind() == ErrorKind::InvalidSubcommand && error.get(ContextKind::SuggestedSubcommand).is_none() {
        if let Some(name) = suggest_subcommand(command, args) {
            error.insert(ContextKind::SuggestedSubcommand, ContextValue::Strings(vec![name]));
        }
    }
    let code = error.exit_code();
    if code != 0 && wants_json(args) {
        let message = error.kind().as_str().unwrap_or("invalid command line").to_string();
        let detail = error.render().to_string();
        let first = detail.lines().next().unwrap_or(&message).trim_start_matches("error: ");
        print_json(&ErrorDocument::new(&[first.to_string()], code));
    }
    error.exit()
}

fn print_json(doc: &ErrorDocument) {
    if let Ok(text) = serde_json::to_string(doc) {
        super::stdout::line(text);
    }
}

/// The subcommand a mistyped one most likely meant, by edit distance with
/// transpositions (`tpc` -> `tcp`), among the subcommands of the command
/// the typo was given to.
fn suggest_subcommand(root: &clap::Command, args: &[OsString]) -> Option<String> {
    let mut current = root;
    let mut typo = None;
    for arg in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if arg.starts_with('-') {
            continue;
        }
        match current.find_subcommand(arg) {
            Some(sub) => current = sub,
            None => {
                typo = Some(arg);
                break;
            }
        }
    }
    let typo = typo?;
    current
        .get_subcommands()
        .map(|s| (edit_distance(typo, s.get_name()), s.get_name()))
        .filter(|(d, name)| *d <= 2 && *d < name.len())
        .min()
        .map(|(_, name)| name.to_string())
}

/// Optimal string alignment distance: insertions, deletions,
/// substitutions and swaps of neighbours each cost 1.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn args(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        let error = anyhow::Error::new(std::io::Error::other(format!("cannot listen on [::]:5310: {io}")))
            .context("starting the agent");
        let error = error.context("outer");
        assert_eq!(lines(&error).len(), 3);
        let repeated = anyhow::anyhow!("lost the agent mid-test: closed").context("lost the agent mid-test: closed");
        assert_eq!(lines(&repeated), vec!["lost the agent mid-test: closed".to_string()]);
    }

    /// Regression: a plan's dry run said a missing key file three times
    /// on one line ("cannot read ...: cannot read ...: No such file...").
    #[test]
    fn one_line_says_each_cause_once() {
        let missing = crate::protocol::auth::Psk::from_file(std::path::Path::new("/nonexistent/nicbench-key"))
            .expect_err("no such file");
        let error = anyhow::Error::new(missing).context("asking the agent for its facts");
        let line = one_line(&error);
        assert_eq!(line.matches("No such file").count(), 1, "{line}");
        assert_eq!(line.matches("cannot read the pre-shared key file").count(), 1, "{line}");
        assert!(
            line.starts_with("asking the agent for its facts: cannot read"),
            "{line}"
        );
    }

    #[test]
    fn a_peers_message_in_the_chain_is_shown_escaped() {
        let error = anyhow::anyhow!("the agent refused: busy\u{1b}[2J\u{202e}\nforged").context("running the test");
        assert_eq!(
            lines(&error),
            vec![
                "running the test".to_string(),
                r"the agent refused: busy\x1b[2J\u{202e}\nforged".to_string()
            ]
        );
    }

    #[test]
    fn a_usage_list_is_one_line_where_one_line_is_needed_and_its_items_are_escaped() {
        let error = anyhow::Error::new(super::super::UsageList {
            head: "p.toml: 2 of 3 cases are not valid command lines:".into(),
            items: vec!["tcp agent=a: bad".into(), "rr agent=\u{1b}[2J: worse".into()],
            hint: "fix the options".into(),
        });
        assert_eq!(super::super::exit_code(&error), 2);
        assert_eq!(
            one_line(&error),
            r"p.toml: 2 of 3 cases are not valid command lines: tcp agent=a: bad; rr agent=\x1b[2J: worse; fix the options"
        );
    }

    #[test]
    fn swapped_letters_find_the_subcommand() {
        let cli = crate::cli::Cli::command();
        assert_eq!(
            suggest_subcommand(&cli, &args("nicbench tpc 127.0.0.1")).as_deref(),
            Some("tcp")
        );
        assert_eq!(
            suggest_subcommand(&cli, &args("nicbench -v pdu")).as_deref(),
            Some("udp")
        );
        assert_eq!(
            suggest_subcommand(&cli, &args("nicbench lab exce x a")).as_deref(),
            Some("exec")
        );
        assert_eq!(suggest_subcommand(&cli, &args("nicbench zzzzzz")), None);
    }

    #[test]
    fn json_is_wanted_only_before_the_double_dash() {
        assert!(wants_json(&args("nicbench tcp h --json")));
        assert!(wants_json(&args("nicbench tcp h --json-stream")));
        assert!(!wants_json(&args("nicbench lab exec l a -- nicbench tcp b --json")));
    }

    #[test]
    fn a_black_hole_found_when_a_test_stalled_is_the_failures_verdict() {
        let hole = crate::side_runner::TrialError::PathBlackHole("packets over 1500 B vanish between a and b".into());
        let error = anyhow::Error::new(crate::session::SessionError::Trial(hole)).context("tcp test against b:5310");
        let verdict = verdict_of(&error).expect("a verdict");
        assert_eq!(verdict.kind, "path_mtu_black_hole");
        assert_eq!(verdict.summary, "packets over 1500 B vanish between a and b");
        let lost = anyhow::anyhow!("lost the agent mid-test: closed");
        assert!(verdict_of(&lost).is_none());
    }

    #[test]
    fn the_error_document_names_kind_message_and_code() {
        let doc = ErrorDocument::new(&["a".into(), "b".into()], 3);
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(v["schema"], ERROR_SCHEMA);
        assert_eq!(v["error"]["kind"], "agent_unreachable");
        assert_eq!(v["error"]["message"], "a: b");
        assert_eq!(v["error"]["exit_code"], 3);
    }
}
