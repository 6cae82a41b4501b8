//! `nicbench run`: options of a roundup plan.

use std::path::PathBuf;

use clap::Args;

/// `nicbench run PLAN.toml`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan file (TOML): agents, defaults, the matrix, commands, report
    /// tables. See docs/PLANS.md and examples/.
    #[arg(value_name = "PLAN.toml")]
    pub plan: PathBuf,
    /// List every case with its command line and the estimated time, and
    /// check the agents (reachable, version, authentication) without
    /// sending test traffic.
    #[arg(long)]
    pub dry_run: bool,
    /// Start a new plan run instead of resuming the last one of this plan.
    #[arg(long)]
    pub restart: bool,
    /// Resume the plan run RUN of this plan (its `plan_run` tag, e.g.
    /// 20261123-201022-d72c) even if the plan changed since it started;
    /// without it, only the newest plan run that measures what the plan
    /// measures now is resumed.
    #[arg(long, value_name = "RUN", conflicts_with = "restart")]
    pub resume: Option<String>,
    /// Run the cases in the file's order (default: shuffled with a recorded
    /// seed, so a drift during the night does not bias one column).
    #[arg(long)]
    pub no_shuffle: bool,
    /// Seed of the shuffle (default: a random one, recorded as tag plan_seed).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Put back host settings (MTUs) that a plan run changed and could not
    /// restore (it crashed or lost power), from its restore file; then exit.
    #[arg(long, conflicts_with_all = ["dry_run", "restart", "resume"])]
    pub restore: bool,
    /// Results database (default: $XDG_DATA_HOME/nicbench/results.db).
    #[arg(long, value_name = "PATH", env = "NICBENCH_DB")]
    pub db: Option<PathBuf>,
}
