//! `nicbench files`: a short raw TCP trial on the path, then the file set,
//! and the result read against the raw figure.

use anyhow::Context;

use super::measure;
use super::signals;
use crate::cli::files::FilesArgs;
use crate::model::{RunResult, TestSpec};
use crate::session::{self, RunOptions};
use crate::units::Bytes;
use crate::workload::files::result::{self, RawTcp};
use crate::workload::files::scratch::Storage;
use crate::workload::files::set::{self, Source};
use crate::workload::files::{self as files, FilesParams};
use crate::workload::SpecError;

pub fn run(args: FilesArgs) -> anyhow::Result<()> {
    let spec = spec(&args)?;
    // Refused before the raw TCP trial, not after it.
    crate::workload::find("files")?.validate(&spec)?;
    files::set_client_storage(Storage {
        scratch: args.scratch.clone(),
        keep: args.keep,
        max_files_bytes: None,
    });
    let m = &args.measure;
    signals::install();
    let raw = if args.raw_time.is_zero() {
        None
    } else {
        Some(raw_tcp(&args, &spec).context("the raw TCP trial before the files")?)
    };
    let params: FilesParams = spec.params()?;
    let page_cache = page_cache(&args, &params);
    let level = params.compress_level;
    let adjust = |run: &mut RunResult| {
        result::attach(&mut run.result, raw.as_ref(), page_cache.as_deref(), level);
        for trial in &mut run.trials {
            result::attach(trial, raw.as_ref(), page_cache.as_deref(), level);
        }
        crate::verdict::annotate_link(run, m.link_speed, m.link_overhead);
    };
    let measured = measure::measure_adjusted(m, &spec, &|| None, &adjust)?;
    measure::conclude(measured, |measured| measure::finish(m, measured))
}

/// The test spec a `files` command line asks for.
pub fn spec(args: &FilesArgs) -> anyhow::Result<TestSpec> {
    let (source, files, total_bytes) = match (&args.generate, &args.from) {
        (Some(source), _) => {
            let (files, bytes) = source.generated_totals().expect("a generated set");
            (source.clone(), files, bytes)
        }
        (None, Some(dir)) => {
            let walked = set::walk(dir).with_context(|| format!("--from {}", dir.display()))?;
            if walked.skipped_symlinks + walked.skipped_other > 0 {
                log::warn!(
                    "{}: {} symbolic link(s) and {} special file(s) skipped (only regular files are sent)",
                    dir.display(),
                    walked.skipped_symlinks,
                    walked.skipped_other
                );
            }
            if walked.entries.is_empty() {
                return Err(
                    SpecError::Invalid(format!("--from {}: no regular files there to send", dir.display())).into(),
                );
            }
            let path = std::fs::canonicalize(dir).with_context(|| format!("--from {}", dir.display()))?;
            let total = walked.entries.iter().map(|e| e.size).sum();
            (
                Source::Directory {
                    path: path.to_string_lossy().into_owned(),
                },
                walked.entries.len() as u64,
                total,
            )
        }
        (None, None) => return Err(SpecError::Invalid("give --generate SET or --from DIR".into()).into()),
    };
    let mut measure_args = args.measure.clone();
    if let Some(n) = args.parallel_files {
        measure_args.streams = n;
    }
    let mut spec = measure::base_spec("files", &measure_args, args.length);
    // The set ends the test, not a time.
    spec.bytes = Some(total_bytes.max(1));
    let params = FilesParams {
        source,
        files,
        total_bytes,
        compressibility: args.compressibility,
        compress_level: args.compress,
        fsync: args.fsync,
    };
    spec.set_params(&params)?;
    Ok(spec)
}

/// The raw TCP trial: as many connections, the same direction and buffers.
fn raw_tcp(args: &FilesArgs, files_spec: &TestSpec) -> anyhow::Result<RawTcp> {
    let mut spec = files_spec.clone();
    spec.workload = "tcp".into();
    spec.bytes = None;
    spec.duration_seconds = args.raw_time.as_secs_f64();
    spec.omit_seconds = 0.0;
    spec.params = serde_json::Value::Null;
    let target = measure::target(&args.measure)?;
    let run = session::run(
        &target,
        &spec,
        RunOptions {
            interrupted: &signals::client_stop_reason,
            on_interval: None,
            on_progress: None,
            trial: 1,
        },
    )?;
    let receiver = &run.result.sum.receiver;
    if log::log_enabled!(log::Level::Warn) {
        eprintln!(
            "raw TCP on this path: {} in {:.1} s ({} stream(s)); now the files",
            crate::units::Rate(receiver.bits_per_second),
            receiver.seconds,
            spec.streams
        );
    }
    Ok(RawTcp {
        bits_per_second: receiver.bits_per_second,
        seconds: receiver.seconds,
        streams: spec.streams,
        verdict: run.result.verdict.map(|v| v.summary),
    })
}

/// Empties the page cache when asked (and able), and says what the cache
/// held for the sender.
fn page_cache(args: &FilesArgs, params: &FilesParams) -> Option<String> {
    let reads_files = matches!(params.source, Source::Directory { .. });
    if !args.drop_caches {
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
