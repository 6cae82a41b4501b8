//! Plans: what users write and `nicbench run` executes — a test matrix
//! from a TOML file, run unattended as one case after another, resumable
//! from the results store, with comparison tables at the end.

pub mod exec;
pub mod file;
pub mod host;
pub mod identity;
pub mod matrix;
pub mod path_mtu;
pub mod queue;
pub mod runner;

pub use file::{Plan, PlanError};
pub use matrix::{expand, Case};
