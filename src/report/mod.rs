//! Rendering results: one [`Reporter`] per output format, each writing to
//! any `Write`. A workload's own part reads through its `TextView`.

pub mod chart;
pub mod compare;
pub mod cpu_scope;
pub mod facts;
pub mod grid;
pub mod html;
pub mod interruption;
pub mod json;
pub mod linerate;
pub mod mesh;
pub mod multilink;
pub mod receivers;
pub mod roundup;
pub mod runs;
pub mod text;

use std::io::{self, Write};

use crate::model::RunResult;

/// Renders a run to a writer.
pub trait Reporter {
    fn render(&self, run: &RunResult, out: &mut dyn Write) -> io::Result<()>;
}
