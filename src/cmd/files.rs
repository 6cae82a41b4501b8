//! `nicbench files`: the file set, a short raw TCP trial on the same path
//! right after its first trial, and the result read against the raw figure.
//! The set goes first so that an agent that refuses it (over its
//! `--max-files-bytes`) does so before any traffic at all.

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
    let params: FilesParams = spec.params()?;
    let page_cache = page_cache(&args, &params);
    let level = params.compress_level;
    // Run once, when the first files trial has ended (the agent accepted
    // the set): every trial is read against it.
    let raw: std::cell::OnceCell<Option<RawTcp>> = std::cell::OnceCell::new();
    let adjust = |run: &mut RunResult| {
        let raw = raw.get_or_init(|| {
            if args.options.raw_time.is_zero() || signals::client_stop_reason().is_some() {
                return None;
            }
            match raw_tcp(&args, &spec) {
                Ok(raw) => Some(raw),
                Err(e) => {
                    log::warn!(
                        "the raw TCP trial after the files failed ({e:#}): the files result is not read against it"
                    );
                    None
                }
            }
        });
        result::attach(&mut run.result, raw.as_ref(), page_cache.as_deref(), level);
        for trial in &mut run.trials {
            result::attach(trial, raw.as_ref(), page_cache.as_deref(), level);
        }
        crate::verdict::annotate_link(run, m.link_speed, m.link_overhead);
    };
    let measured = measure::measure_adjusted(m, &spec, &|| None, &adjust)?;
    measure::conclude(measured, |measured| measure::finish(m, measured))
}

/// The raw TCP trial: as many connections, the same direction, buffers and
/// transport (MPTCP when the files went over it).
fn raw_tcp(args: &FilesArgs, files_spec: &TestSpec) -> anyhow::Result<RawTcp> {
    let spec = files::raw_tcp_spec(files_spec, args.options.raw_time.as_secs_f64());
    let target = measure::target(&args.measure)?;
    // The agent may still be closing the files trial just before.
    let busy_until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let run = loop {
        let result = session::run(
            &target,
            &spec,
            RunOptions {
                interrupted: &signals::client_stop_reason,
                on_interval: None,
                on_progress: None,
                trial: 1,
            },
        );
        match result {
            Err(session::SessionError::Busy { .. }) if std::time::Instant::now() < busy_until => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            other => break other?,
        }
    };
    let receiver = &run.result.sum.receiver;
    let raw = RawTcp {
        bits_per_second: receiver.bits_per_second,
        seconds: receiver.seconds,
        streams: spec.streams,
        verdict: run.result.verdict.map(|v| v.summary),
        transport: crate::workload::transport_of(&spec)
            .filter(|p| !p.is_tcp())
            .map(|p| p.name().to_string()),
    };
    if log::log_enabled!(log::Level::Warn) {
        eprintln!(
            "{} on this path, after the files: {} in {:.1} s ({} stream(s))",
            raw.words(),
            crate::units::Rate(raw.bits_per_second),
            raw.seconds,
            raw.streams
        );
    }
    Ok(raw)
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
