use clap::Parser;

fn main() {
    let cli = nicbench::cli::Cli::parse();
    if let Err(error) = nicbench::cmd::run(cli) {
        eprintln!("nicbench: error: {error}");
        for cause in error.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(nicbench::cmd::exit_code(&error));
    }
}
