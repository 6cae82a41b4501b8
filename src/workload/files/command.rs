//! The files workload's part of `nicbench files` beyond its spec: where
//! the client writes what it receives, the page cache before the trial,
//! and the raw TCP trial on the same path that every files trial is read
//! against. The set is checked first, so that an agent that refuses it
//! (over its `--max-files-bytes`) does so before any traffic at all.

use std::path::PathBuf;
use std::time::Duration;

use super::result::{self, RawTcp};
use super::scratch::Storage;
use super::set::Source;
use super::FilesParams;
use crate::model::{RunResult, TrialResult};
use crate::units::{Bytes, Rate};
use crate::workload::args::{Around, Companion};
use crate::workload::{Settings, SpecError, TestSpec, Workload};

/// Around a files test: the options that say how the client runs it.
pub struct FilesAround {
    pub scratch: Option<PathBuf>,
    pub keep: bool,
    pub drop_caches: bool,
    /// 0: no raw TCP trial.
    pub raw_time: Duration,
    /// What the page cache held for the sender, once prepared.
    page_cache: Option<String>,
    /// The files' compression level, once prepared.
    level: Option<i32>,
}

impl FilesAround {
    pub fn new(scratch: Option<PathBuf>, keep: bool, drop_caches: bool, raw_time: Duration) -> FilesAround {
        FilesAround {
            scratch,
            keep,
            drop_caches,
            raw_time,
            page_cache: None,
            level: None,
        }
    }

    /// Empties the page cache when asked (and able), and says what the
    /// cache held for the sender.
    fn page_cache(&self, params: &FilesParams) -> Option<String> {
        let reads_files = matches!(params.source, Source::Directory { .. });
        if !self.drop_caches {
            return reads_files
                .then(|| "warm: the source files may be read from the page cache (--drop-caches to empty it)".into());
        }
        if !reads_files {
            return Some("not dropped: a generated set reads no files".into());
        }
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        match std::fs::write("/proc/sys/vm/drop_caches", "3") {
            Ok(()) => Some("dropped before the trial (cold reads)".into()),
            Err(e) => {
                let why = format!(
                    "warm: could not drop the page cache ({e}; needs root), the source files of {} may be read from memory",
                    Bytes(params.total_bytes)
                );
                log::warn!("{why}");
                Some(why)
            }
        }
    }
}

/// The raw trial's figures, from its run.
fn raw_of(run: &RunResult) -> RawTcp {
    let receiver = &run.result.sum.receiver;
    RawTcp {
        bits_per_second: receiver.bits_per_second,
        seconds: receiver.seconds,
        streams: run.spec.streams,
        verdict: run.result.verdict.as_ref().map(|v| v.summary.clone()),
        transport: crate::workload::transport_of(&run.spec)
            .filter(|p| !p.is_tcp())
            .map(|p| p.name().to_string()),
    }
}

impl Around for FilesAround {
    fn prepare(&mut self, spec: &TestSpec, settings: &mut Settings) -> Result<(), SpecError> {
        // Refused before the raw TCP trial, not after it.
        crate::workload::args::check(spec)?;
        settings.set(
            super::Files.name(),
            Storage {
                scratch: self.scratch.clone(),
                keep: self.keep,
                max_files_bytes: None,
                remove_in_background: false,
            },
        );
        let params: FilesParams = spec.params()?;
        self.page_cache = self.page_cache(&params);
        self.level = params.compress_level;
        Ok(())
    }

    fn companion(&self, spec: &TestSpec) -> Option<Companion> {
        (!self.raw_time.is_zero()).then(|| Companion {
            spec: super::raw_tcp_spec(spec, self.raw_time.as_secs_f64()),
            what: "the raw TCP trial after the files",
            unread: "the files result is not read against it",
        })
    }

    fn companion_ran(&self, companion: &RunResult) -> String {
        let raw = raw_of(companion);
        format!(
            "{} on this path, after the files: {} in {:.1} s ({} stream(s))",
            raw.words(),
            Rate(raw.bits_per_second),
            raw.seconds,
            raw.streams
        )
    }

    fn adjust(&self, trial: &mut TrialResult, companion: Option<&RunResult>) -> bool {
        let raw = companion.map(raw_of);
        result::attach(trial, raw.as_ref(), self.page_cache.as_deref(), self.level);
        true
    }
}
