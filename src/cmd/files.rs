//! `nicbench files`: a short raw TCP trial on the path, then the file set,
//! and the result read against the raw figure.

use anyhow::Context;

use super::measure;
use super::signals;
use crate::cli::FilesArgs;
use crate::model::{RunResult, TestSpec};
use crate::session::{self, RunOptions};
use crate::units::Bytes;
use crate::workload::files::result::{self, RawTcp};
use crate::workload::files::scratch::Storage;
use crate::workload::files::set::Source;
use crate::workload::files::{self as files, FilesParams};

pub fn run(args: FilesArgs) -> anyhow::Result<()> {
    let spec = args.measure.spec_with(&args.options)?;
    // Refused before the raw TCP trial, not after it.
    crate::workload::args::check(&spec)?;
    files::set_client_storage(Storage {
        scratch: args.options.scratch.clone(),
        keep: args.options.keep,
        max_files_bytes: None,
        remove_in_background: false,
    });
    let m = &args.measure;
    signals::install();
    let raw = if args.options.raw_time.is_zero() {
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

/// The raw TCP trial: as many connections, the same direction and buffers.
fn raw_tcp(args: &FilesArgs, files_spec: &TestSpec) -> anyhow::Result<RawTcp> {
    let spec = files::raw_tcp_spec(files_spec, args.options.raw_time.as_secs_f64());
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
    if !args.options.drop_caches {
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
