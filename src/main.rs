use clap::{CommandFactory, FromArgMatches};

use nicbench::cmd::failure;

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = nicbench::cli::Cli::command();
    let cli = command
        .clone()
        .try_get_matches_from(&args)
        .and_then(|matches| nicbench::cli::Cli::from_arg_matches(&matches))
        .unwrap_or_else(|e| failure::exit_on_usage_error(e.with_cmd(&command), &command, &args));
    if let Err(error) = nicbench::cmd::run(cli) {
        std::process::exit(failure::report(&error, failure::wants_json(&args)));
    }
}
