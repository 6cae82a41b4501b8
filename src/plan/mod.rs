//! Plans: what users write and `nicbench run` executes — a test matrix
//! from a TOML file, run unattended as one case after another, resumable
//! from the results store, with comparison tables at the end.

pub mod exec;
pub mod file;
pub mod host;
pub mod identity;
pub mod matrix;
pub mod queue;
pub mod runner;

use std::path::{Path, PathBuf};

pub use file::{Plan, PlanError};
pub use matrix::{expand, Case};

/// Where plan runs keep their summaries, command output and restore files:
/// beside the results database `db`. `nicbench run` writes there, and the
/// HTML report and `--restore` read it back.
pub fn plans_dir(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join("plans")
}
