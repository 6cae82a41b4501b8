//! Rendering results: one [`Reporter`] per output format, each writing to
//! any `Write`. Reporters see only the result model, never the workload.

pub mod compare;
pub mod facts;
pub mod json;
pub mod linerate;
pub mod runs;
pub mod sweep;
pub mod text;

use std::io::{self, Write};

use crate::model::RunResult;

/// Renders a run to a writer.
pub trait Reporter {
    fn render(&self, run: &RunResult, out: &mut dyn Write) -> io::Result<()>;
}
