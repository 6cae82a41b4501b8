//! What a `files` trial measured: each connection end's counts and where
//! its time went ([`FilesEnd`], key `files` of a stream end), the totals
//! of the trial ([`FilesResult`], key `files` of `sum`), the comparison
//! with the raw TCP trial run on the same path in the same run, and the rule
//! that names what limited the transfer.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use crate::model::{TrialResult, Verdict};
use crate::units::{Bytes, Rate};

/// Key of the files parts of a stream end and of the trial's sum.
pub const KEY: &str = "files";

/// Share of raw TCP from which the wire is the limit.
pub const LINK_PERCENT: f64 = 90.0;
/// Share of a side's connection time a cause must take to be named.
pub const CAUSE_PERCENT: f64 = 25.0;
/// Files up to this size take one write each: their writes are per-file cost.
pub const SMALL_FILE_BYTES: u64 = 64 * 1024;

/// One connection end's files and where its time went (seconds summed
/// over the files it carried). A sender fills the first group, a receiver
/// the second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesEnd {
    pub files: u64,
    pub payload_bytes: u64,
    /// Sum of xxh3-64(path, xxh3-128 of contents) over its files, hex.
    #[serde(default)]
    pub digest: String,
    /// Sender: opening and closing source files (per-file work).
    #[serde(default)]
    pub open_seconds: f64,
    /// Sender: reading source files (`--from`).
    #[serde(default)]
    pub read_seconds: f64,
    /// Sender: generating contents (`--generate`).
    #[serde(default)]
    pub generate_seconds: f64,
    #[serde(default)]
    pub compress_seconds: f64,
    /// Both: computing xxh3 checksums.
    #[serde(default)]
    pub checksum_seconds: f64,
    /// Sender: blocked writing to the connection (the network or the
    /// receiver is slower).
    #[serde(default)]
    pub send_seconds: f64,
    /// Receiver: checking paths, creating directories and files, closing
    /// them (per-file work).
    #[serde(default)]
    pub create_seconds: f64,
    #[serde(default)]
    pub write_seconds: f64,
    #[serde(default)]
    pub fsync_seconds: f64,
    #[serde(default)]
    pub decompress_seconds: f64,
    /// Receiver: waiting for data from the connection.
    #[serde(default)]
    pub receive_seconds: f64,
    /// Receiver: files removed because the transfer stopped in them.
    #[serde(default)]
    pub partial_files_removed: u64,
    /// The end stopped before the set was done (Ctrl-C, a failure).
    #[serde(default)]
    pub aborted: bool,
    /// Sender: the receiver closed the connection (its report says why).
    #[serde(default)]
    pub peer_closed: bool,
    /// Sender: the receiver's count and digest matched its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

impl FilesEnd {
    fn add(&mut self, o: &FilesEnd) {
        self.files += o.files;
        self.payload_bytes += o.payload_bytes;
        let digest = |s: &str| u64::from_str_radix(s, 16).unwrap_or(0);
        self.digest = format!("{:016x}", digest(&self.digest).wrapping_add(digest(&o.digest)));
        self.open_seconds += o.open_seconds;
        self.read_seconds += o.read_seconds;
        self.generate_seconds += o.generate_seconds;
        self.compress_seconds += o.compress_seconds;
        self.checksum_seconds += o.checksum_seconds;
        self.send_seconds += o.send_seconds;
        self.create_seconds += o.create_seconds;
        self.write_seconds += o.write_seconds;
        self.fsync_seconds += o.fsync_seconds;
        self.decompress_seconds += o.decompress_seconds;
        self.receive_seconds += o.receive_seconds;
        self.partial_files_removed += o.partial_files_removed;
        self.aborted |= o.aborted;
        self.peer_closed |= o.peer_closed;
        self.verified = match (self.verified, o.verified) {
            (None, v) | (v, None) => v,
            (Some(a), Some(b)) => Some(a && b),
        };
    }
}

/// The raw TCP trial run with the files (right after the first files
/// trial), on the same path, with as many connections.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawTcp {
    pub bits_per_second: f64,
    pub seconds: f64,
    pub streams: u32,
    /// That trial's own verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The transport it ran over, the files' own (`mptcp`); absent for
    /// plain TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
}

impl RawTcp {
    /// How the raw trial reads in text: "raw TCP", "raw MPTCP".
    pub fn words(&self) -> String {
        let label = self
            .transport
            .as_deref()
            .and_then(|name| crate::workload::transport::Proto::by_name(name).ok())
            .map_or("TCP", |p| p.label());
        format!("raw {label}")
    }
}

/// What limited the transfer, by the rule of [`limit`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// `link`, `per_file_overhead`, `sender_disk_reads`, `sender_cpu`,
    /// `receiver_disk_writes`, `receiver_cpu` or `none`.
    pub kind: String,
    pub summary: String,
}

/// The trial's files totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesResult {
    /// Files and payload the receiver wrote and verified.
    pub files: u64,
    pub payload_bytes: u64,
    /// Bytes on the data connections (headers, chunks, checksums).
    pub wire_bytes: u64,
    /// From the start to the receiver's last file (its slowest connection).
    pub seconds: f64,
    pub files_per_second: f64,
    pub payload_bits_per_second: f64,
    pub wire_bits_per_second: f64,
    /// Data connections (`--parallel-files`).
    pub connections: u32,
    /// Every file's checksum matched on the receiver, and both ends'
    /// counts and set digests agree.
    pub verified: bool,
    /// Sums over the sending and the receiving connection ends.
    pub sender: FilesEnd,
    pub receiver: FilesEnd,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_tcp: Option<RawTcp>,
    /// Payload rate as a share of the raw TCP rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_of_raw_tcp: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<Limit>,
    /// The sender's page cache before the trial: `dropped`, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<String>,
    /// zstd level, when compressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compress_level: Option<i32>,
}

/// Totals of a merged trial, from its connection ends.
pub fn summarize(trial: &mut TrialResult) {
    let mut total = FilesResult::default();
    for stream in &trial.streams {
        let sender: Option<FilesEnd> = stream.sender.extras.get(KEY);
        let receiver: Option<FilesEnd> = stream.receiver.extras.get(KEY);
        if let Some(s) = sender {
            total.sender.add(&s);
        }
        if let Some(r) = receiver {
            total.receiver.add(&r);
            total.connections += 1;
            total.wire_bytes += stream.receiver.bytes + stream.receiver.warmup_bytes;
            total.seconds = total.seconds.max(stream.receiver.seconds);
        }
    }
    if total.connections == 0 {
        return;
    }
    total.files = total.receiver.files;
    total.payload_bytes = total.receiver.payload_bytes;
    if total.seconds > 0.0 {
        total.files_per_second = total.files as f64 / total.seconds;
        total.payload_bits_per_second = total.payload_bytes as f64 * 8.0 / total.seconds;
        total.wire_bits_per_second = total.wire_bytes as f64 * 8.0 / total.seconds;
    }
    total.verified = total.sender.verified == Some(true)
        && total.sender.files == total.receiver.files
        && total.sender.digest == total.receiver.digest;
    trial.sum.extras.set(KEY, &total);
}

/// Puts the raw TCP figure (and what else the command knows) into a trial
/// and judges what limited it.
pub fn attach(trial: &mut TrialResult, raw: Option<&RawTcp>, page_cache: Option<&str>, level: Option<i32>) {
    let Some(mut total) = trial.sum.extras.get::<FilesResult>(KEY) else {
        return;
    };
    total.raw_tcp = raw.cloned();
    total.page_cache = page_cache.map(str::to_string);
    total.compress_level = level;
    total.percent_of_raw_tcp = raw
        .filter(|r| r.bits_per_second > 0.0)
        .map(|r| total.payload_bits_per_second * 100.0 / r.bits_per_second);
    total.limited_by = Some(limit(&total));
    trial.sum.extras.set(KEY, &total);
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part * 100.0 / whole
    } else {
        0.0
    }
}

/// What limited the transfer: the link when the wire carried at least 90%
/// of what raw TCP did on the same path; else the largest share of a
/// side's connection time spent on one kind of work, when it is at least
/// 25%: per-file work (creating, opening and closing files, and the writes
/// of small files, one each), reading source files, writing (and fsync),
/// or CPU (generating, compressing, decompressing, checksumming).
pub fn limit(r: &FilesResult) -> Limit {
    let make = |kind: &str, summary: String| Limit {
        kind: kind.into(),
        summary,
    };
    let wire_share = r
        .raw_tcp
        .as_ref()
        .map(|raw| share(r.wire_bits_per_second, raw.bits_per_second));
    let raw = r.raw_tcp.as_ref().map_or_else(|| "raw TCP".to_string(), RawTcp::words);
    if let Some(s) = wire_share.filter(|&s| s >= LINK_PERCENT) {
        let compressed = match r.compress_level {
            Some(level) if r.wire_bytes > 0 && r.payload_bytes > r.wire_bytes => format!(
                "; zstd level {level} carried {:.1}x the payload over it",
                r.payload_bytes as f64 / r.wire_bytes as f64
            ),
            _ => String::new(),
        };
        return make(
            "link",
            format!("the link (the wire carried {s:.0}% of the {raw} rate){compressed}"),
        );
    }
    let time = r.seconds * f64::from(r.connections.max(1));
    let (s, v) = (&r.sender, &r.receiver);
    let average = r.payload_bytes.checked_div(r.files).unwrap_or(0);
    let small = average <= SMALL_FILE_BYTES;
    let per_file_receiver = per_file_receiver_seconds(r);
    let per_file = per_file_receiver.max(s.open_seconds);
    let level = r.compress_level.map_or(String::new(), |l| format!(" (zstd level {l})"));
    let candidates = [
        (
            "per_file_overhead",
            per_file,
            format!(
                "per-file overhead ({} files of {} on average; the receiver spent {:.0} us per file creating, \
                 writing and closing it)",
                r.files,
                Bytes(average),
                per_file_receiver * 1e6 / r.files.max(1) as f64
            ),
        ),
        ("sender_disk_reads", s.read_seconds, "sender disk reads".to_string()),
        (
            "sender_cpu",
            s.generate_seconds + s.compress_seconds + s.checksum_seconds,
            if s.compress_seconds > s.generate_seconds + s.checksum_seconds {
                format!("sender CPU{level}: compressing")
            } else {
                "sender CPU: generating and checksumming the data".to_string()
            },
        ),
        (
            "receiver_disk_writes",
            if small { 0.0 } else { v.write_seconds } + v.fsync_seconds,
            if v.fsync_seconds > v.write_seconds {
                "receiver disk writes (fsync)".to_string()
            } else {
                "receiver disk writes".to_string()
            },
        ),
        (
            "receiver_cpu",
            v.decompress_seconds + v.checksum_seconds,
            if v.decompress_seconds > v.checksum_seconds {
                format!("receiver CPU{level}: decompressing")
            } else {
                "receiver CPU: checksumming".to_string()
            },
        ),
    ];
    let (kind, seconds, words) = candidates
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("candidates");
    let taken = share(seconds, time);
    if taken >= CAUSE_PERCENT {
        return make(kind, format!("{words}, {taken:.0}% of the connections' time"));
    }
    make(
        "none",
        format!(
            "nothing stands out (the largest share of the connections' time, {taken:.0}%, went to {words}{})",
            wire_share.map_or(String::new(), |s| format!(
                "; the wire carried {s:.0}% of the {raw} rate"
            ))
        ),
    )
}

/// The receiver's time that each file costs whatever its size: creating
/// and closing it, and, for small files, writing it.
fn per_file_receiver_seconds(r: &FilesResult) -> f64 {
    let small = r.payload_bytes.checked_div(r.files).unwrap_or(0) <= SMALL_FILE_BYTES;
    r.receiver.create_seconds + if small { r.receiver.write_seconds } else { 0.0 }
}

/// MB/s (10^6 bytes) of a bit rate.
fn megabytes_per_second(bits_per_second: f64) -> String {
    format!("{:.2} MB/s", bits_per_second / 8e6)
}

/// Words for a payload rate above raw TCP (compression), else nothing.
fn above_raw(r: &FilesResult) -> String {
    let raw = r.raw_tcp.as_ref().map_or_else(|| "raw TCP".to_string(), RawTcp::words);
    match (r.percent_of_raw_tcp, r.compress_level) {
        (Some(p), Some(level)) if p > 100.0 && r.wire_bytes > 0 => format!(
            "; above the {raw} rate: zstd level {level} sent {:.2} payload bytes per byte on the wire",
            r.payload_bytes as f64 / r.wire_bytes as f64
        ),
        (Some(p), None) if p > 100.0 => format!("; above the {raw} rate (that trial may have been slowed by others)"),
        _ => String::new(),
    }
}

/// The verdict of a files trial: how far from raw TCP and why.
pub fn verdict(trial: &TrialResult) -> Option<Verdict> {
    let r: FilesResult = trial.sum.extras.get(KEY)?;
    let raw = r.raw_tcp.as_ref()?;
    let limit = r.limited_by.clone().unwrap_or_else(|| limit(&r));
    // The end the limit is on, for the verdict's reasoning: a starved end
    // explains its own disk and CPU shares.
    let side = match limit.kind.as_str() {
        "link" => Some("path"),
        // The end that spent more per file: the receiver creating and
        // closing, or the sender opening.
        "per_file_overhead" if per_file_receiver_seconds(&r) >= r.sender.open_seconds => Some("receiver"),
        "per_file_overhead" => Some("sender"),
        kind => ["sender", "receiver"].into_iter().find(|end| kind.starts_with(end)),
    };
    let mut verdict = Verdict::new(
        &format!("files_{}", limit.kind),
        format!(
            "files: {} = {:.0}% of {} {} on this path{}; limited by: {}",
            megabytes_per_second(r.payload_bits_per_second),
            r.percent_of_raw_tcp.unwrap_or(0.0),
            raw.words(),
            megabytes_per_second(raw.bits_per_second),
            above_raw(&r),
            limit.summary
        ),
    );
    verdict.side = side.map(str::to_string);
    Some(verdict)
}

/// The `Files` lines of the text report.
pub fn write_summary(trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(r) = trial.sum.extras.get::<FilesResult>(KEY) else {
        return Ok(());
    };
    let check = if r.verified {
        format!(
            "verified: every file's xxh3-128 and the set digest {} match on both ends",
            r.receiver.digest
        )
    } else {
        "NOT VERIFIED: the ends' counts or digests differ, or the set was not finished".to_string()
    };
    writeln!(
        out,
        "Files: {} files, {} payload ({} on the wire) in {:.2} s: {:.1} files/s, payload {} ({}), wire {}; {check}",
        r.files,
        Bytes(r.payload_bytes),
        Bytes(r.wire_bytes),
        r.seconds,
        r.files_per_second,
        megabytes_per_second(r.payload_bits_per_second),
        Rate(r.payload_bits_per_second),
        megabytes_per_second(r.wire_bits_per_second),
    )?;
    if let Some(raw) = &r.raw_tcp {
        let words = raw.words();
        writeln!(
            out,
            "Files vs {words}: payload {} = {:.0}% of {words} {} ({:.1} s, {} stream{}, same path, same run){}",
            megabytes_per_second(r.payload_bits_per_second),
            r.percent_of_raw_tcp.unwrap_or(0.0),
            megabytes_per_second(raw.bits_per_second),
            raw.seconds,
            raw.streams,
            if raw.streams == 1 { "" } else { "s" },
            above_raw(&r)
        )?;
    }
    if let Some(limit) = &r.limited_by {
        writeln!(out, "Files limited by: {}", limit.summary)?;
    }
    let (s, v) = (&r.sender, &r.receiver);
    writeln!(
        out,
        "Files time (summed over {} connection{}): sender open+close {:.2} s, read {:.2} s, generate {:.2} s, \
         compress {:.2} s, checksum {:.2} s, blocked sending {:.2} s; receiver create+close {:.2} s, write {:.2} s, \
         fsync {:.2} s, decompress {:.2} s, checksum {:.2} s, waiting for data {:.2} s",
        r.connections,
        if r.connections == 1 { "" } else { "s" },
        s.open_seconds,
        s.read_seconds,
        s.generate_seconds,
        s.compress_seconds,
        s.checksum_seconds,
        s.send_seconds,
        v.create_seconds,
        v.write_seconds,
        v.fsync_seconds,
        v.decompress_seconds,
        v.checksum_seconds,
        v.receive_seconds
    )?;
    if let Some(cache) = &r.page_cache {
        writeln!(out, "Files page cache: {cache}")?;
    }
    if v.partial_files_removed > 0 {
        writeln!(out, "Files: {} partial file(s) removed", v.partial_files_removed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(files: u64, payload: u64, wire_bps: f64, raw_bps: f64) -> FilesResult {
        FilesResult {
            files,
            payload_bytes: payload,
            wire_bytes: payload,
            seconds: 10.0,
            connections: 1,
            payload_bits_per_second: wire_bps,
            wire_bits_per_second: wire_bps,
            raw_tcp: Some(RawTcp {
                bits_per_second: raw_bps,
                seconds: 3.0,
                streams: 1,
                verdict: None,
                transport: None,
            }),
            ..FilesResult::default()
        }
    }

    #[test]
    fn near_raw_tcp_the_link_is_the_limit() {
        let r = result(1, 200_000_000, 95e6, 100e6);
        assert_eq!(limit(&r).kind, "link");
    }

    #[test]
    fn the_raw_trial_is_named_by_its_transport_in_every_line() {
        let mut r = result(1, 200_000_000, 95e6, 100e6);
        assert!(limit(&r).summary.contains("of the raw TCP rate"), "{:?}", limit(&r));
        r.raw_tcp.as_mut().unwrap().transport = Some("mptcp".into());
        assert!(limit(&r).summary.contains("of the raw MPTCP rate"), "{:?}", limit(&r));
        r.percent_of_raw_tcp = Some(102.0);
        r.limited_by = Some(limit(&r));
        let mut trial = TrialResult::default();
        trial.sum.extras.set(KEY, &r);
        let mut text = Vec::new();
        write_summary(&trial, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains("raw TCP"), "{text}");
        assert!(
            text.contains("Files vs raw MPTCP: ") && text.contains("above the raw MPTCP rate"),
            "{text}"
        );
        let summary = verdict(&trial).unwrap().summary;
        assert!(summary.contains("% of raw MPTCP "), "{summary}");
    }

    #[test]
    fn small_files_with_busy_receivers_are_per_file_overhead() {
        let mut r = result(20_000, 20_000 * 1024, 30e6, 95e6);
        r.receiver.create_seconds = 3.0;
        r.receiver.write_seconds = 2.0;
        r.receiver.receive_seconds = 4.0;
        let l = limit(&r);
        assert_eq!(l.kind, "per_file_overhead", "{l:?}");
        assert!(l.summary.contains("20000 files"), "{}", l.summary);
        // Its side is the end that spent more per file, for the reasoning
        // (a starved receiver explains its own per-file time).
        let side = |r: &FilesResult| {
            let mut trial = TrialResult::default();
            trial.sum.extras.set(KEY, r);
            verdict(&trial).and_then(|v| v.side)
        };
        assert_eq!(side(&r).as_deref(), Some("receiver"));
        r.sender.open_seconds = 6.0;
        assert_eq!(side(&r).as_deref(), Some("sender"));
        // The same write time on big files is the disk.
        let mut big = result(10, 10 << 30, 30e6, 95e6);
        big.receiver.write_seconds = 5.0;
        assert_eq!(limit(&big).kind, "receiver_disk_writes");
    }

    #[test]
    fn compression_and_idle_ends_read_as_such() {
        let mut r = result(10, 1 << 30, 30e6, 95e6);
        r.compress_level = Some(19);
        r.sender.compress_seconds = 8.0;
        let l = limit(&r);
        assert_eq!(l.kind, "sender_cpu");
        assert!(l.summary.contains("zstd level 19"), "{}", l.summary);
        let idle = result(10, 1 << 30, 30e6, 95e6);
        assert_eq!(limit(&idle).kind, "none");
    }

    #[test]
    fn ends_add_up_and_digests_sum() {
        let mut a = FilesEnd {
            files: 1,
            digest: "ffffffffffffffff".into(),
            verified: Some(true),
            ..FilesEnd::default()
        };
        a.add(&FilesEnd {
            files: 2,
            digest: "0000000000000002".into(),
            verified: Some(false),
            ..FilesEnd::default()
        });
        assert_eq!(a.files, 3);
        assert_eq!(a.digest, "0000000000000001");
        assert_eq!(a.verified, Some(false));
    }
}
