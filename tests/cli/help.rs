//! Every subcommand's `--help`, and the root's `-h`, as the binary prints
//! them to a pipe: a change to the command line (an option, its help, the
//! order of subcommands) shows up as a diff of
//! tests/cli/snapshots/cli__help__*.snap. The CLI is built from the
//! workload registry; these snapshots are what keeps that construction
//! byte for byte what users read. Review a change with
//! `cargo insta review` (or rerun with `INSTA_UPDATE=always` and read the
//! diff in git).

use std::process::Command;

use clap::CommandFactory;
use nicbench::cli::Cli;

use super::common::*;

/// Every command path under the root, depth first, in the order `--help`
/// lists them: `["serve"]`, ..., `["lab", "up"]`, ...
fn paths(command: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        let mut path = prefix.to_vec();
        path.push(sub.get_name().to_string());
        out.push(path.clone());
        paths(sub, &path, out);
    }
}

/// What the binary prints for `args`, with no variable of ours in its
/// environment (an option backed by one shows the variable's value).
fn printed(args: &[String]) -> String {
    let mut command = Command::new(BIN);
    command.args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("NICBENCH_") || key == "COLUMNS" {
            command.env_remove(&key);
        }
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "nicbench {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_subcommands_help_is_as_recorded() {
    let mut all = Vec::new();
    paths(&Cli::command(), &[], &mut all);
    assert!(all.len() > 30, "{all:?}");
    let mut by_top: Vec<(String, String)> = Vec::new();
    for path in &all {
        let mut args = path.clone();
        args.push("--help".into());
        let text = format!("$ nicbench {}\n{}", args.join(" "), printed(&args));
        match by_top.last_mut() {
            Some((top, joined)) if *top == path[0] => joined.push_str(&text),
            _ => by_top.push((path[0].clone(), text)),
        }
    }
    for (top, text) in by_top {
        insta::assert_snapshot!(format!("help-{top}"), text);
    }
}

#[test]
fn the_roots_help_is_as_recorded() {
    let short = printed(&["-h".to_string()]);
    let long = printed(&["--help".to_string()]);
    insta::assert_snapshot!("help-root", format!("$ nicbench -h\n{short}$ nicbench --help\n{long}"));
}
