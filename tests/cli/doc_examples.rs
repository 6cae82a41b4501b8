//! The command examples of README.md and docs/*.md, checked against the
//! program (issue 43: the README's Prometheus probe example failed as
//! written, and nothing noticed). Every `nicbench` command in a shell block
//! must parse as the CLI has it now (clap's own error only where the example
//! shows that error); a `lab exec ... -- nicbench ...` is checked inside too.
//! Examples whose output is deterministic (`linerate`) are run and their
//! output compared with what the page shows.

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};

use crate::common::{nicbench, stderr};

/// One example: where it is, its words, and the page's lines after it
/// (its output as shown, up to the next command or the block's end).
#[derive(Debug)]
struct Example {
    at: String,
    argv: Vec<String>,
    shown: Vec<String>,
}

fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// Splits a command line as a POSIX shell would for the simple cases the
/// pages use: words, 'single' and "double" quotes, backslash escapes.
/// None when it needs more (a variable, a substitution).
fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '$' | '`' => return None,
                        '\\' => word.push(chars.next()?),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            '$' | '`' | '*' | '?' | '[' | '{' => return None,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// The part of a shell line that is one nicbench command: up to a pipe,
/// a redirection, `&`, `&&`, `;` or a comment (the pages' `#` comments
/// follow a blank).
fn first_command(line: &str) -> &str {
    let mut end = line.len();
    for stop in [" | ", " |", " > ", " 2>", " >", " &", ";", " #", " <"] {
        if let Some(i) = line.find(stop) {
            end = end.min(i);
        }
    }
    line[..end].trim()
}

/// Every nicbench command of a page's shell blocks. In a block with `$ `
/// prompts only the prompted lines are commands (the rest is output); in
/// a block without, every unindented line that starts with `nicbench ` is.
fn examples_of(page: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page.file_name().unwrap().to_string_lossy().into_owned();
    let mut out = Vec::new();
    let mut block: Option<(usize, Vec<&str>)> = None;
    for (number, line) in text.lines().enumerate() {
        if let Some(fence) = line.trim_start().strip_prefix("```") {
            match block.take() {
                Some((start, lines)) => out.extend(commands_in(&name, start, &lines)),
                None if matches!(fence.trim(), "" | "sh" | "shell" | "bash" | "console" | "text") => {
                    block = Some((number + 2, Vec::new()))
                }
                None => block = Some((usize::MAX, Vec::new())),
            }
            continue;
        }
        if let Some((start, lines)) = block.as_mut() {
            if *start != usize::MAX {
                lines.push(line);
            }
        }
    }
    out
}

fn commands_in(page: &str, start: usize, lines: &[&str]) -> Vec<Example> {
    let prompted = lines.iter().any(|l| l.starts_with("$ "));
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let raw = lines[i];
        let line = if prompted { raw.strip_prefix("$ ") } else { Some(raw) };
        let at = format!("{page}:{}", start + i);
        i += 1;
        let Some(mut line) = line.map(str::to_string) else {
            continue;
        };
        // Without prompts, an indented line is a script's output (the
        // benchmarks' `  nicbench udp -b max / iperf3: x1.31`), not a command.
        if !prompted && raw.starts_with(char::is_whitespace) {
            continue;
        }
        // Continuation lines.
        while line.ends_with('\\') && i < lines.len() {
            line.pop();
            line.push(' ');
            line.push_str(lines[i].trim_start().trim_start_matches("> "));
            i += 1;
        }
        let shown: Vec<String> = lines[i..]
            .iter()
            .take_while(|l| !(prompted && l.starts_with("$ ")))
            .map(|l| l.to_string())
            .collect();
        for part in line.split("&&").flat_map(|p| p.split(';')) {
            let command = first_command(part.trim());
            if !command.starts_with("nicbench ") && command != "nicbench" {
                continue;
            }
            // Without prompts, a line that starts with `nicbench` is a
            // command only when a subcommand follows (not a log line such
            // as `nicbench info: ...`, nor a table's `nicbench  30.82 Gbit/s`).
            let known = |argv: &[String]| {
                argv.get(1)
                    .is_some_and(|w| w.starts_with('-') || nicbench::cli::Cli::command().find_subcommand(w).is_some())
            };
            // A table's row (`nicbench rr --proto tcp   33413   57.7 us`)
            // has columns apart by several blanks; a command does not.
            let table_row = !prompted && command.contains("  ");
            if let Some(argv) = shell_words(command).filter(|a| !table_row && (prompted || known(a))) {
                out.push(Example {
                    at: at.clone(),
                    argv,
                    shown: if prompted { shown.clone() } else { Vec::new() },
                });
            }
        }
    }
    out
}

fn all_examples() -> Vec<Example> {
    pages().iter().flat_map(|p| examples_of(p)).collect()
}

/// The nicbench commands inside an example: itself, and what `lab exec`
/// runs after `--` when that is nicbench too.
fn nested(argv: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![argv.to_vec()];
    if argv.get(1).is_some_and(|a| a == "lab") && argv.get(2).is_some_and(|a| a == "exec") {
        if let Some(dash) = argv.iter().position(|a| a == "--") {
            if argv.get(dash + 1).is_some_and(|a| a == "nicbench") {
                out.push(argv[dash + 1..].to_vec());
            }
        }
    }
    out
}

#[test]
fn the_pages_have_examples_to_check() {
    let examples = all_examples();
    assert!(examples.len() > 150, "only {} examples found", examples.len());
    let parse = |line: &str| shell_words(first_command(line));
    assert_eq!(
        parse("nicbench tcp b -t 3 --tag 'nic=x 1' | head"),
        Some(
            vec!["nicbench", "tcp", "b", "-t", "3", "--tag", "nic=x 1"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    assert_eq!(parse("nicbench tcp $HOST"), None);
}

/// Every example parses as the command line it claims to be, except where
/// the page shows clap's refusal (`error: ...` right after it).
#[test]
fn every_documented_command_parses() {
    let mut wrong = Vec::new();
    for e in all_examples() {
        let refused = e.shown.first().is_some_and(|l| l.starts_with("error:"));
        for argv in nested(&e.argv) {
            match (nicbench::cli::Cli::try_parse_from(&argv), refused) {
                (Ok(_), false) | (Err(_), true) => {}
                (Ok(_), true) => wrong.push(format!(
                    "{}: `{}` parses, but the page shows an error",
                    e.at,
                    argv.join(" ")
                )),
                (Err(err), false) => {
                    use clap::error::ErrorKind;
                    // A placeholder where a number goes (`-p PORT`) is a
                    // page's way of saying "your value here".
                    let placeholder = argv.iter().skip(2).map(|w| w.trim_end_matches('.')).any(|w| {
                        w.len() >= 2
                            && w.chars()
                                .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
                    });
                    if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                        || (placeholder && err.kind() == ErrorKind::ValueValidation)
                    {
                        continue;
                    }
                    let first = err.render().to_string();
                    let first = first.lines().next().unwrap_or_default().to_string();
                    wrong.push(format!("{}: `{}`: {first}", e.at, argv.join(" ")));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} documented command(s) no longer parse:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// Examples whose output depends on nothing but their arguments are run,
/// and print what the page shows.
#[test]
fn deterministic_examples_print_what_the_page_shows() {
    let mut ran = 0;
    for e in all_examples() {
        if e.argv.get(1).map(String::as_str) != Some("linerate") || e.shown.is_empty() {
            continue;
        }
        let args: Vec<&str> = e.argv[1..].iter().map(String::as_str).collect();
        let out = nicbench(&args);
        assert!(out.status.success(), "{}: {}", e.at, stderr(&out));
        let printed = String::from_utf8_lossy(&out.stdout);
        // What the page shows is the output's beginning (`| head -4`), up
        // to a `...` where it leaves the rest out.
        let shown: Vec<&str> = e
            .shown
            .iter()
            .map(|l| l.trim_end())
            .take_while(|l| *l != "...")
            .collect();
        let shown = shown.join("\n");
        let shown = shown.trim_end();
        let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
        let printed = printed.join("\n");
        assert!(
            printed.starts_with(shown),
            "{}: `{}` prints\n{printed}\nand the page shows\n{shown}",
            e.at,
            e.argv.join(" ")
        );
        ran += 1;
    }
    assert!(ran >= 2, "only {ran} linerate examples with output");
}

/// Regression (issue 72, item 6): the key recipes wrote the key with the
/// shell's umask (`head -c 32 /dev/urandom | base64 > /tmp/jumbo.psk`),
/// readable by every user, and the agent then warned about it. Every
/// recipe on the pages, in the examples and in the key error's hint
/// writes its file under `umask 077`.
#[test]
fn every_key_recipe_makes_a_file_only_its_owner_reads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = pages();
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    examples.sort();
    files.extend(examples);
    files.push(root.join("src/protocol/auth.rs"));
    let mut recipes = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            // A key written into a file, not handed to a command by `$(...)`.
            if line.contains("/dev/urandom") && line.contains(" > ") {
                recipes += 1;
                assert!(
                    line.contains("umask 077"),
                    "{}:{}: a key file others may read; write it as \
                     `(umask 077; head -c 32 /dev/urandom | base64 > FILE)`: {line}",
                    file.display(),
                    n + 1
                );
            }
        }
    }
    assert!(recipes >= 5, "the recipes moved: {recipes} found");
}
