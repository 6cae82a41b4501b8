//! The sweep's part of `nicbench sweep` beyond its spec: the shared
//! options it refuses, its progress, and `--csv` in place of the text
//! report.

use std::io::{self, Write};

use super::result::{SweepResult, KEY};
use super::text::csv;
use crate::model::RunResult;
use crate::workload::args::{Around, SpecArgs};

/// Around a sweep: `csv` when `--csv` asked for its points as CSV.
pub struct SweepAround {
    pub csv: bool,
}

impl Around for SweepAround {
    fn refuse(&self, shared: &SpecArgs) -> Result<(), String> {
        if !shared.omit.is_zero() {
            return Err(
                "-O/--omit does not apply to a sweep: every size starts with an untimed warm-up exchange".into(),
            );
        }
        if shared.interval.is_some() {
            return Err("-i/--interval does not apply to a sweep: it reports one line per size instead".into());
        }
        Ok(())
    }

    fn progress_unit(&self) -> Option<&'static str> {
        Some("sizes x passes")
    }

    fn csv(&self, run: &RunResult, out: &mut dyn Write) -> Option<io::Result<()>> {
        if !self.csv {
            return None;
        }
        let sweeps = run
            .result
            .streams
            .iter()
            .filter_map(|s| s.sender.extras.get::<SweepResult>(KEY));
        let mut written = Ok(());
        for sweep in sweeps {
            written = csv(&sweep, out).and_then(|_| out.flush());
            if written.is_err() {
                break;
            }
        }
        Some(written)
    }
}
