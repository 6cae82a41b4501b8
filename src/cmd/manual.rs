//! `nicbench man` and `nicbench completions`: the manual page and shell
//! completions, generated from the same clap definitions as `--help`.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use super::stdout::write_out;
use crate::cli::{Cli, CompletionShell, CompletionsArgs, ManArgs};

pub fn man(args: ManArgs) -> anyhow::Result<()> {
    let command = Cli::command();
    match args.out {
        None => write_out(|out| clap_mangen::Man::new(command).render(out)),
        Some(dir) => {
            let written = write_pages(command, &dir)?;
            write_out(|out| written.iter().try_for_each(|path| writeln!(out, "{}", path.display())))
        }
    }
}

/// nicbench.1 and a page per subcommand, nested ones too (nicbench-lab-up.1).
fn write_pages(command: clap::Command, dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "creating {} for the manual pages; check the path and its permissions",
            dir.display()
        )
    })?;
    // Building names every subcommand `nicbench-tcp`, `nicbench-lab-up`, ...
    let mut command = command;
    command.build();
    let mut written = Vec::new();
    let mut pending = vec![command];
    while let Some(command) = pending.pop() {
        let name = command.get_display_name().unwrap_or(command.get_name()).to_string();
        let path = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        clap_mangen::Man::new(command.clone())
            .render(&mut page)
            .context("rendering a manual page")?;
        std::fs::write(&path, page)
            .with_context(|| format!("writing {}; check the directory's permissions", path.display()))?;
        written.push(path);
        pending.extend(command.get_subcommands().filter(|s| s.get_name() != "help").cloned());
    }
    written.sort();
    Ok(written)
}

pub fn completions(args: CompletionsArgs) -> anyhow::Result<()> {
    let shell = match args.shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    // Into memory first: clap_complete panics when its writer fails.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "nicbench", &mut script);
    write_out(|out| out.write_all(&script))
}
