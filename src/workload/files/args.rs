//! Options of `nicbench files`, and how they complete its spec.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::set::{self, Source};
use super::{Files, FilesParams};
use crate::workload::args::{parse, Context, WorkloadArgs};
use crate::workload::transport::shorthand::{Shorthand, StreamShorthands};
use crate::workload::transport::Proto;
use crate::workload::{SpecError, TestSpec, Workload};

/// Parses `--compress`: `zstd` (level 3) or `zstd:LEVEL`.
pub fn compress(s: &str) -> Result<i32, String> {
    let (name, level) = s.split_once(':').unwrap_or((s, "3"));
    if !name.eq_ignore_ascii_case("zstd") {
        return Err(format!("'{s}': the compressor is zstd (zstd or zstd:LEVEL)"));
    }
    let level: i32 = level
        .parse()
        .map_err(|_| format!("'{s}': the level must be a whole number"))?;
    let levels = super::ZSTD_LEVELS;
    if !levels.contains(&level) {
        return Err(format!("'{s}': zstd levels are {} to {}", levels.start(), levels.end()));
    }
    Ok(level)
}

/// Parses `--compressibility`: a share from 0 to 1.
pub fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "'{s}': a share from 0 (random data) to 1 (all zeros), e.g. 0.5"
        )),
    }
}

/// Parses `--raw-time`: 0 (no raw TCP trial) or a test's duration.
pub fn raw_time(s: &str) -> Result<Duration, String> {
    match parse::duration(s)? {
        d if d.is_zero() => Ok(d),
        _ => parse::test_duration(s).map_err(|e| format!("{e}, or 0 for none")),
    }
}

/// The options of `nicbench files` besides the shared ones (`--drop-caches`,
/// `--raw-time`, `--scratch` and `--keep` say how the client runs it, not
/// what the test is).
#[derive(Debug, Clone, Args)]
pub struct FilesOptions {
    /// A generated set: COUNTxSIZE (13x1.9G, 200000x8K) or `mixed` (1000
    /// files from 1 KiB to 16 MiB). Contents are generated as they are sent.
    #[arg(long, value_name = "SET", value_parser = Source::parse_generate,
          conflicts_with = "from", required_unless_present = "from")]
    pub generate: Option<Source>,
    /// Send the regular files of this directory tree (symbolic links and
    /// special files are skipped and counted).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Files in flight: one data connection each (same as -P).
    #[arg(long, value_name = "N",
          value_parser = parse::between::<u32>(1, crate::model::spec::MAX_STREAMS as u64))]
    pub parallel_files: Option<u32>,
    /// Compress on the fly: zstd or zstd:LEVEL (1-22; default level 3).
    #[arg(long, value_name = "zstd[:LEVEL]", value_parser = compress)]
    pub compress: Option<i32>,
    /// Share of generated contents a compressor can remove: 0 (random) to 1 (zeros).
    #[arg(long, value_name = "0..1", default_value = "0", value_parser = share)]
    pub compressibility: f64,
    /// fsync every received file before closing it.
    #[arg(long)]
    pub fsync: bool,
    /// Empty the sending host's page cache before the files trial, so the
    /// source files are read cold (--from; needs root: said when it could not).
    #[arg(long)]
    pub drop_caches: bool,
    /// Length of the raw TCP trial run on the same path right after the first files trial (0: none).
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = raw_time)]
    pub raw_time: Duration,
    /// Bytes per chunk read, sent and written (at most 1M).
    #[arg(short = 'l', long = "length", value_name = "SIZE", default_value = "256K",
          value_parser = parse::size_in(1, super::wire::MAX_CHUNK as u64))]
    pub length: u64,
    /// What the data connections run over: `tcp` (the default) or `mptcp`
    /// (Multipath TCP on both ends: each connection's subflows are in the
    /// result, and the raw trial runs over it too). tls and quic are refused,
    /// with the reason.
    #[arg(long, value_name = "NAME", hide_possible_values = true)]
    pub transport: Option<Proto>,
    /// `--mptcp`.
    #[command(flatten)]
    pub shorthands: StreamShorthands,
    /// With --reverse: where this host writes what it receives (a new
    /// directory under DIR) [default: $XDG_CACHE_HOME/nicbench/scratch].
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// With --reverse: keep the received files.
    #[arg(long)]
    pub keep: bool,
}

impl FilesOptions {
    /// The set to send: its source, number of files and bytes.
    fn set(&self) -> Result<(Source, u64, u64), SpecError> {
        let (source, dir) = match (&self.generate, &self.from) {
            (Some(source), _) => {
                let (files, bytes) = source.generated_totals().expect("a generated set");
                return Ok((source.clone(), files, bytes));
            }
            (None, Some(dir)) => (dir, dir.display()),
            (None, None) => return Err(SpecError::Invalid("give --generate SET or --from DIR".into())),
        };
        let unreadable = |e: std::io::Error| SpecError::Invalid(format!("--from {dir}: {e}"));
        let walked = set::walk(source).map_err(unreadable)?;
        if walked.skipped_symlinks + walked.skipped_other > 0 {
            log::warn!(
                "{dir}: {} symbolic link(s) and {} special file(s) skipped (only regular files are sent)",
                walked.skipped_symlinks,
                walked.skipped_other
            );
        }
        // What the receiver would refuse (a path over its depth limit), said before anything moves.
        for entry in &walked.entries {
            super::wire::check_path(&entry.path)
                .map_err(|why| SpecError::Invalid(format!("--from {dir}: {why}; the receiver would refuse it")))?;
        }
        if walked.entries.is_empty() {
            return Err(SpecError::Invalid(format!(
                "--from {dir}: no regular files there to send"
            )));
        }
        let path = std::fs::canonicalize(source).map_err(unreadable)?;
        let total = walked.entries.iter().map(|e| e.size).sum();
        let source = Source::Directory {
            path: path.to_string_lossy().into_owned(),
        };
        Ok((source, walked.entries.len() as u64, total))
    }
}

impl WorkloadArgs for FilesOptions {
    const WORKLOAD: &'static dyn Workload = &Files;
    const ABOUT: &'static str =
        "File transfer: a generated set or a directory tree, verified, against raw TCP on the same path";
    const NO_TIME: Option<&'static str> = Some(
        "a files test lasts until its set is sent; the raw TCP trial before it is --raw-time (e.g. --raw-time 2s)",
    );

    fn around(&self) -> Box<dyn crate::workload::args::Around> {
        Box::new(super::command::FilesAround::new(
            self.scratch.clone(),
            self.keep,
            self.drop_caches,
            self.raw_time,
        ))
    }

    fn complete(&self, spec: &mut TestSpec, _: &Context) -> Result<(), SpecError> {
        let (source, files, total_bytes) = self.set()?;
        if let Some(n) = self.parallel_files {
            spec.streams = n;
        }
        spec.message_bytes = self.length;
        // The set ends the test, not a time.
        spec.bytes = Some(total_bytes.max(1));
        spec.set_params(&FilesParams {
            source,
            files,
            total_bytes,
            compressibility: self.compressibility,
            compress_level: self.compress,
            fsync: self.fsync,
            transport: self.shorthands.transport(self.transport),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compress_and_share_values() {
        assert_eq!(compress("zstd").unwrap(), 3);
        assert_eq!(compress("zstd:19").unwrap(), 19);
        assert!(compress("gzip").unwrap_err().contains("zstd"));
        assert!(compress("zstd:30").unwrap_err().contains("1 to 22"));
        assert_eq!(share("0.5").unwrap(), 0.5);
        assert!(share("1.5").is_err());
        assert_eq!(raw_time("0").unwrap(), Duration::ZERO);
        assert!(raw_time("0.0000001").unwrap_err().contains("or 0 for none"));
    }
}

/// The files workload's options of `nicbench serve`: where received files
/// go and how much may arrive.
#[derive(Debug, Clone, Args)]
pub struct FilesServeArgs {
    /// Where `files` tests write what they receive: a new directory per test
    /// under DIR [default: $XDG_CACHE_HOME/nicbench/scratch].
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Keep the files a `files` test received (they are removed after each test otherwise).
    #[arg(long)]
    pub keep: bool,
    /// Largest file set (payload) a `files` test may send here; larger sets
    /// are refused before anything is written. Default: no limit.
    #[arg(long, value_name = "SIZE", value_parser = parse::positive_size)]
    pub max_files_bytes: Option<u64>,
}

/// [`FilesServeArgs`] as the registry hands them to `serve`.
pub struct ServeFiles;

impl crate::workload::ServeOptions for ServeFiles {
    fn augment(&self, command: clap::Command) -> clap::Command {
        <FilesServeArgs as Args>::augment_args(command)
    }

    fn read(&self, matches: &clap::ArgMatches, settings: &mut crate::workload::Settings) -> Result<(), clap::Error> {
        use clap::FromArgMatches;
        let args = FilesServeArgs::from_arg_matches(matches)?;
        settings.set(
            Files.name(),
            super::scratch::Storage {
                scratch: args.scratch,
                keep: args.keep,
                max_files_bytes: args.max_files_bytes,
                // The agent, a long-lived process: its slot is free at once.
                remove_in_background: true,
            },
        );
        Ok(())
    }
}
