//! `nicbench files`: sets verified end to end on loopback, the agent's
//! scratch directory and quota, hostile peers that send paths out of it, a
//! full scratch filesystem, and in the lab over a 100 Mbit/s router: one
//! big file against raw TCP, many small files, compression.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

use nicbench::model::{Direction, SideOptions, TestSpec};
use nicbench::protocol::{token_from_hex, Message};
use nicbench::workload::files::result::{limit, FilesResult, CAUSE_PERCENT, LINK_PERCENT, SMALL_FILE_BYTES};
use nicbench::workload::files::set::Source;
use nicbench::workload::files::{wire, FilesParams};
use serde_json::Value;

use super::common::*;
use super::rawclient::Raw;

fn files_json(agent: &AgentProcess, args: &[&str]) -> Value {
    let mut all = vec!["--raw-time", "0.3s", "--no-save"];
    all.extend_from_slice(args);
    agent.run_json("files", &all)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// How many regular files are under `dir`, at any depth.
fn walkdir_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| {
                let e = e.unwrap();
                match e.file_type().unwrap().is_dir() {
                    true => walkdir_files(&e.path()),
                    false => 1,
                }
            })
            .sum()
        })
        .unwrap_or(0)
}

/// [`entries`] once the agent's removal threads are done: an agent renames
/// a finished test's directory to `.removing-...` at once and removes it
/// on a thread of its own (so its slot is free meanwhile).
fn entries_once_removed(dir: &Path) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let names = entries(dir);
        if !names.iter().any(|n| n.starts_with(".removing-")) || std::time::Instant::now() > deadline {
            return names;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_directory_tree_arrives_verified_and_byte_for_byte_with_keep() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("top.txt"), b"top").unwrap();
    std::fs::write(root.join("a/empty"), b"").unwrap();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(root.join("a/b/big.bin"), &big).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("a/link")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let agent = AgentProcess::start(&["--scratch", scratch.path().to_str().unwrap(), "--keep"]);
    let run = files_json(
        &agent,
        &["--from", root.to_str().unwrap(), "--parallel-files", "2", "-l", "64K"],
    );
    let files = &run["sum"]["files"];
    assert_eq!(files["files"], 3, "{files}");
    assert_eq!(files["payload_bytes"], 3_000_003);
    assert_eq!(files["verified"], true);
    assert_eq!(files["connections"], 2);
    assert!(files["wire_bytes"].as_u64().unwrap() > 3_000_003);
    assert!(files["raw_tcp"]["bits_per_second"].as_f64().unwrap() > 0.0);
    assert!(files["limited_by"]["kind"].is_string());
    // Kept: one test directory holding the same tree, without the link.
    let tests = entries(scratch.path());
    assert_eq!(tests.len(), 1, "{tests:?}");
    let kept = scratch.path().join(&tests[0]);
    assert_eq!(std::fs::read(kept.join("a/b/big.bin")).unwrap(), big);
    assert_eq!(std::fs::read(kept.join("top.txt")).unwrap(), b"top");
    assert_eq!(std::fs::read(kept.join("a/empty")).unwrap(), b"");
    assert!(!kept.join("a/link").exists());
}

#[test]
fn generated_sets_both_ways_leave_no_scratch_behind() {
    let scratch = tempfile::tempdir().unwrap();
    let mine = tempfile::tempdir().unwrap();
    let agent = AgentProcess::start(&["--scratch", scratch.path().to_str().unwrap()]);
    let forward = files_json(
        &agent,
        &[
            "--generate",
            "300x10K",
            "--compress",
            "zstd:3",
            "--compressibility",
            "0.8",
        ],
    );
    assert_eq!(forward["sum"]["files"]["files"], 300);
    assert_eq!(forward["sum"]["files"]["verified"], true);
    assert!(
        forward["sum"]["files"]["wire_bytes"].as_u64().unwrap() < 300 * 10 * 1024 / 2,
        "compressed on the wire"
    );
    let reverse = files_json(
        &agent,
        &[
            "--generate",
            "mixed",
            "--reverse",
            "--scratch",
            mine.path().to_str().unwrap(),
        ],
    );
    assert_eq!(reverse["sum"]["files"]["files"], 1000);
    assert_eq!(reverse["sum"]["files"]["verified"], true);
    assert_eq!(reverse["spec"]["direction"], "reverse");
    assert!(
        entries_once_removed(scratch.path()).is_empty(),
        "the agent's test directory is removed"
    );
    assert!(
        entries_once_removed(mine.path()).is_empty(),
        "the client's test directory is removed"
    );
    // The client's --scratch and --keep reach its side of the test (they
    // travel as the workload's settings, not in the spec).
    let kept = tempfile::tempdir().unwrap();
    let reverse = files_json(
        &agent,
        &[
            "--generate",
            "3x1K",
            "--reverse",
            "--scratch",
            kept.path().to_str().unwrap(),
            "--keep",
        ],
    );
    assert_eq!(reverse["sum"]["files"]["files"], 3);
    let tests = entries(kept.path());
    assert_eq!(
        tests.len(),
        1,
        "one kept test directory under the client's --scratch: {tests:?}"
    );
    let files = walkdir_files(&kept.path().join(&tests[0]));
    assert_eq!(files, 3, "the three files kept under {}", tests[0]);
}

#[test]
fn a_set_over_the_agents_quota_is_refused_before_anything_is_written() {
    let scratch = tempfile::tempdir().unwrap();
    let agent = AgentProcess::start(&["--scratch", scratch.path().to_str().unwrap(), "--max-files-bytes", "1M"]);
    let port = agent.port_arg();
    let out = nicbench(&[
        "files",
        "127.0.0.1",
        "-p",
        &port,
        "--generate",
        "3x1M",
        "--raw-time",
        "0",
        "--no-save",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--max-files-bytes") && err.contains("3.15 MB"), "{err}");
    assert!(entries_once_removed(scratch.path()).is_empty());
}

#[test]
fn bad_options_are_refused_naming_them() {
    for (args, needle) in [
        (&["--generate", "10"][..], "COUNTxSIZE"),
        (&["--generate", "1x1K", "--compress", "gzip"], "zstd"),
        (&["--generate", "1x1K", "--compressibility", "2"], "0 (random data)"),
        (&["--generate", "1x1K", "--bidir"], "--bidir does not apply"),
        (&["--from", "/nonexistent-nicbench-dir"], "/nonexistent-nicbench-dir"),
    ] {
        let mut all = vec!["files", "127.0.0.1", "-p", "1", "--no-save"];
        all.extend_from_slice(args);
        let out = nicbench(&all);
        assert_ne!(out.status.code(), Some(0));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

/// A client that follows the protocol up to the data connection, then
/// sends one file under `path`; returns the agent's report of its end.
fn send_hostile(agent: &AgentProcess, path: &[u8]) -> String {
    let mut frames = Vec::new();
    file_frame(&mut frames, path, b"evil");
    send_set(agent, (1, 4), &frames)
}

/// Appends the frames of one file to `out`.
fn file_frame(out: &mut Vec<u8>, path: &[u8], contents: &[u8]) {
    wire::put_header(out, path, contents.len() as u64);
    if !contents.is_empty() {
        out.extend_from_slice(&(contents.len() as u32).to_be_bytes());
        out.extend_from_slice(contents);
    }
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_128(contents).to_be_bytes());
}

/// A client that follows the protocol up to the data connection, declaring
/// a generated set of `declared` (files, bytes per file), then sends
/// `frames` and the end mark whatever it declared; returns the agent's
/// report of its end.
fn send_set(agent: &AgentProcess, declared: (u64, u64), frames: &[u8]) -> String {
    let (count, file_bytes) = declared;
    let params = FilesParams {
        source: Source::Generated { count, file_bytes },
        files: count,
        total_bytes: count * file_bytes,
        compressibility: 0.0,
        compress_level: None,
        fsync: false,
        ..FilesParams::default()
    };
    let mut spec = TestSpec {
        workload: "files".into(),
        duration_seconds: 10.0,
        bytes: Some((count * file_bytes).max(1)),
        omit_seconds: 0.0,
        streams: 1,
        direction: Direction::Forward,
        message_bytes: 65536,
        interval_seconds: 1.0,
        client: SideOptions::default(),
        agent: SideOptions::default(),
        params: Value::Null,
        links: Vec::new(),
    };
    spec.set_params(&params).unwrap();
    let mut raw = Raw::connect(agent.port);
    raw.hello().send(&Message::TestRequest {
        spec,
        wait_seconds: 0.0,
    });
    let (token, port) = match raw.recv() {
        Some(Message::Accepted { token, data_ports, .. }) => (token_from_hex(&token).unwrap(), data_ports[0]),
        other => panic!("expected accepted, got {other:?}"),
    };
    let mut data = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut preamble = token.to_vec();
    preamble.extend_from_slice(&1u32.to_be_bytes());
    data.write_all(&preamble).unwrap();
    assert!(matches!(raw.recv(), Some(Message::Ready)));
    raw.send(&Message::Start);
    let mut frames = frames.to_vec();
    frames.push(wire::KIND_END);
    // The agent stops reading at a refusal: the rest may not be taken.
    let _ = data.write_all(&frames);
    let _ = data.shutdown(std::net::Shutdown::Write);
    let mut rest = Vec::new();
    let _ = data.read_to_end(&mut rest);
    match raw.recv() {
        Some(Message::Done { report }) => report.streams[0].error.clone().unwrap_or_default(),
        other => panic!("expected the agent's report, got {other:?}"),
    }
}

#[test]
fn a_sender_that_sends_more_files_than_declared_is_stopped_and_the_scratch_cleaned() {
    // Issue 31: 1 file of 0 bytes declared, then 2,000 empty files.
    let scratch = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::start(&["--scratch", scratch.path().to_str().unwrap()]);
    let mut frames = Vec::new();
    for i in 0..2000 {
        file_frame(&mut frames, format!("d/f{i:05}").as_bytes(), b"");
    }
    let error = send_set(&agent, (1, 0), &frames);
    assert!(
        error.contains("refused file 'd/f00001'") && error.contains("declared 1 file(s)"),
        "{error}"
    );
    assert!(
        entries_once_removed(scratch.path()).is_empty(),
        "{:?}",
        entries(scratch.path())
    );
    agent.assert_serves_normally();
}

#[test]
fn deep_directories_of_long_names_are_charged_against_max_files_bytes_and_stopped() {
    // Issue 31: 300 files 15 directories deep with 205-byte names (18 MB of
    // directories) against --max-files-bytes 10M.
    let scratch = tempfile::tempdir().unwrap();
    let mut agent = AgentProcess::start(&[
        "--scratch",
        scratch.path().to_str().unwrap(),
        "--max-files-bytes",
        "10M",
    ]);
    let mut frames = Vec::new();
    for i in 0..300 {
        let dirs: Vec<String> = (0..15).map(|d| format!("{i:03}{d:02}{}", "n".repeat(200))).collect();
        file_frame(&mut frames, format!("{}/f", dirs.join("/")).as_bytes(), b"");
    }
    let error = send_set(&agent, (300, 0), &frames);
    assert!(
        error.contains("refused")
            && error.contains("10.49 MB this agent accepts per test on disk (its --max-files-bytes")
            && error.contains("4 KiB more"),
        "{error}"
    );
    assert!(
        entries_once_removed(scratch.path()).is_empty(),
        "{:?}",
        entries(scratch.path())
    );
    // A path deeper than the depth limit is refused by name.
    let deep = format!("{}/f", vec!["d"; 17].join("/"));
    let mut frames = Vec::new();
    file_frame(&mut frames, deep.as_bytes(), b"");
    let error = send_set(&agent, (1, 0), &frames);
    assert!(
        error.contains("17 directory levels deep, more than the depth limit of 16"),
        "{error}"
    );
    assert!(entries_once_removed(scratch.path()).is_empty());
    agent.assert_serves_normally();
}

#[test]
fn hostile_peer_paths_are_refused_and_nothing_is_written_outside_the_scratch_directory() {
    let base = tempfile::tempdir().unwrap();
    let scratch = base.path().join("scratch");
    let mut agent = AgentProcess::start(&["--scratch", scratch.to_str().unwrap()]);
    let absolute = base.path().join("absolute");
    for (path, needle) in [
        (b"../x".to_vec(), "'..'"),
        (b"../../y".to_vec(), "'..'"),
        (absolute.as_os_str().as_encoded_bytes().to_vec(), "absolute"),
        (b"a\0b".to_vec(), "NUL"),
    ] {
        let error = send_hostile(&agent, &path);
        assert!(error.contains("refused path") && error.contains(needle), "{error}");
    }
    assert_eq!(
        entries_once_removed(base.path()),
        vec!["scratch"],
        "only the scratch directory"
    );
    assert!(
        entries_once_removed(&scratch).is_empty(),
        "every test directory removed"
    );
    assert!(!Path::new("/x").exists() && !Path::new("/y").exists());
    agent.assert_serves_normally();
}

/// A small tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "nicbench-test",
                dir.path().to_str().unwrap(),
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_scratch_filesystem_stops_the_test_with_a_clear_error_and_no_partial_files() {
    let tmpfs = require!(Tmpfs::mount("4m").map_err(|why| format!("cannot mount a tmpfs here (needs root): {why}")));
    let agent = AgentProcess::start(&["--scratch", tmpfs.0.path().to_str().unwrap()]);
    let port = agent.port_arg();
    // Over half the free space: refused before anything is written.
    let out = nicbench(&[
        "files",
        "127.0.0.1",
        "-p",
        &port,
        "--generate",
        "4x3M",
        "--raw-time",
        "0",
        "--no-save",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a test may take at most half of it"),
        "{}",
        stderr(&out)
    );
    let out = nicbench(&[
        "files",
        "127.0.0.1",
        "-p",
        &port,
        // 2000 files of one byte: 514 kB of payload and entries, within
        // half the 4 MiB free, but a tmpfs spends a 4 KiB page per file,
        // so it fills around the thousandth file, during the test.
        "--generate",
        "2000x1",
        "--raw-time",
        "0",
        "--no-save",
    ]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("is full") && err.contains("partial"), "{err}");
    assert!(
        entries_once_removed(tmpfs.0.path()).is_empty(),
        "{:?}",
        entries(tmpfs.0.path())
    );
    drop(agent);
}

// ---- the lab: a 100 Mbit/s router between two hosts ----

/// A lab with a 100 Mbit/s bottleneck in its router and an agent in `b`
/// writing into its own scratch directory.
fn lab_with_agent(scratch: &Path) -> (nicbench::lab::Lab, AgentProcess) {
    lab_with_agent_at(scratch, 100_000_000)
}

/// The same through a router shaped to `rate` bits/s.
fn lab_with_agent_at(scratch: &Path, rate: u64) -> (nicbench::lab::Lab, AgentProcess) {
    let lab = lab_builder().via_router().rate(rate).no_agents().build().unwrap();
    let b = lab.addr("b").to_string();
    let agent = AgentProcess::start_with(lab.command("b", BIN), &b, &["--scratch", scratch.to_str().unwrap()]);
    (lab, agent)
}

fn lab_files(lab: &nicbench::lab::Lab, agent: &AgentProcess, args: &[&str]) -> (Value, String) {
    let b = lab.addr("b").to_string();
    let port = agent.port_arg();
    let mut command = lab.command("a", BIN);
    clean_env(&mut command)
        .args(["files", &b, "-p", &port, "--no-save"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(command.spawn().unwrap(), COMMAND_LIMIT, "nicbench files in the lab");
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    (json, stderr(&out))
}

/// The files verdict agrees with the breakdown it reports: the figures
/// hold together (rates are bytes over the same seconds, the share of raw
/// TCP is the payload rate over raw TCP's), and `limited_by` is what the
/// rule (`limit`, src/workload/files/result.rs) gives from the reported
/// figures, with the cause it names holding the share that rule needs.
/// Nothing here depends on how fast the machine is.
fn assert_limit_agrees(files: &Value) {
    let r: FilesResult = serde_json::from_value(files.clone()).expect("a files result");
    let near = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
    assert!(
        near(r.payload_bits_per_second, r.payload_bytes as f64 * 8.0 / r.seconds),
        "{files}"
    );
    assert!(
        near(r.wire_bits_per_second, r.wire_bytes as f64 * 8.0 / r.seconds),
        "{files}"
    );
    let raw = r.raw_tcp.as_ref().expect("a raw TCP figure");
    let percent = r.percent_of_raw_tcp.expect("a share of raw TCP");
    assert!(
        near(percent, r.payload_bits_per_second * 100.0 / raw.bits_per_second),
        "{files}"
    );
    let limited_by = r.limited_by.clone().expect("limited_by");
    assert_eq!(
        limited_by,
        limit(&r),
        "the verdict is not the rule's on these figures: {files}"
    );
    let wire_share = r.wire_bits_per_second * 100.0 / raw.bits_per_second;
    let time = r.seconds * f64::from(r.connections.max(1));
    match limited_by.kind.as_str() {
        "link" => assert!(wire_share >= LINK_PERCENT, "{wire_share}% of raw TCP: {files}"),
        "per_file_overhead" => {
            let v = &r.receiver;
            let small = r.payload_bytes / r.files.max(1) <= SMALL_FILE_BYTES;
            let per_file = (v.create_seconds + if small { v.write_seconds } else { 0.0 }).max(r.sender.open_seconds);
            assert!(wire_share < LINK_PERCENT, "{wire_share}% of raw TCP: {files}");
            assert!(
                per_file * 100.0 >= CAUSE_PERCENT * time,
                "{per_file} s of {time} s: {files}"
            );
        }
        _ => {}
    }
}

#[test]
fn lab_one_big_file_is_limited_by_the_link_as_its_figures_say() {
    require_lab!();
    let scratch = tempfile::tempdir().unwrap();
    let (lab, agent) = lab_with_agent(scratch.path());
    let (run, _) = lab_files(&lab, &agent, &["--generate", "1x200MB", "--raw-time", "3s", "--json"]);
    let files = &run["sum"]["files"];
    let percent = files["percent_of_raw_tcp"].as_f64().unwrap();
    eprintln!(
        "200 MB file: {:.1} Mbit/s payload, raw TCP {:.1} Mbit/s: {percent:.1}%",
        files["payload_bits_per_second"].as_f64().unwrap() / 1e6,
        files["raw_tcp"]["bits_per_second"].as_f64().unwrap() / 1e6
    );
    assert_eq!(files["verified"], true);
    assert_limit_agrees(files);
    assert_eq!(files["limited_by"]["kind"], "link", "{files}");
    drop(agent);
    drop(lab);
}

#[test]
fn lab_many_small_files_are_limited_by_per_file_overhead_as_their_figures_say() {
    require_lab!();
    let scratch = tempfile::tempdir().unwrap();
    // Through 1 Gbit/s, not 100 Mbit/s: a fast host made 39,400 files of
    // 256 B a second, whose 48 bytes of framing each filled a 100 Mbit/s
    // wire (100% of raw TCP: the link, rightly). A host would need ten
    // times that to fill this one.
    let (lab, agent) = lab_with_agent_at(scratch.path(), 1_000_000_000);
    let (run, _) = lab_files(&lab, &agent, &["--generate", "20000x256", "--raw-time", "3s", "--json"]);
    let files = &run["sum"]["files"];
    let percent = files["percent_of_raw_tcp"].as_f64().unwrap();
    eprintln!(
        "20000 files of 256 B: {percent:.1}% of raw TCP; {}",
        run["verdict"]["summary"]
    );
    assert_eq!(files["files"], 20000);
    assert_eq!(files["verified"], true);
    assert_limit_agrees(files);
    assert_eq!(files["limited_by"]["kind"], "per_file_overhead", "{files}");
    let verdict = run["verdict"]["summary"].as_str().unwrap();
    assert!(verdict.contains("per-file overhead"), "{verdict}");
}

#[test]
fn lab_compression_carries_more_payload_than_wire_and_the_verdict_says_when_it_beats_raw_tcp() {
    require_lab!();
    let scratch = tempfile::tempdir().unwrap();
    let (lab, agent) = lab_with_agent(scratch.path());
    let args = [
        "--generate",
        "4x40MB",
        "--compressibility",
        "0.9",
        "--compress",
        "zstd:1",
        "--raw-time",
        "3s",
        "--json",
    ];
    let (run, _) = lab_files(&lab, &agent, &args);
    let files = &run["sum"]["files"];
    let percent = files["percent_of_raw_tcp"].as_f64().unwrap();
    eprintln!(
        "compressed set: {percent:.1}% of raw TCP; {}",
        run["verdict"]["summary"]
    );
    assert_eq!(files["verified"], true);
    assert_limit_agrees(files);
    // zstd carried more payload than it put on the wire (a property of the
    // data, not of the machine's speed) ...
    let (payload, wire) = (
        files["payload_bytes"].as_u64().unwrap(),
        files["wire_bytes"].as_u64().unwrap(),
    );
    assert!(payload > wire, "compression shrank nothing: {files}");
    // ... and the verdict says so exactly when the payload beat raw TCP.
    let verdict = run["verdict"]["summary"].as_str().unwrap();
    assert_eq!(
        verdict.contains("above the raw TCP rate: zstd level 1"),
        percent > 100.0,
        "{percent:.1}% of raw TCP: {verdict}"
    );
}

/// Regression: `files --generate` ran its raw TCP trial before the agent
/// refused a set over its quota. The set goes first now: refused before
/// any traffic, with the raw trial left at its default.
#[test]
fn a_set_over_the_quota_is_refused_before_the_raw_tcp_trial_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let agent = AgentProcess::start(&["--scratch", scratch.path().to_str().unwrap(), "--max-files-bytes", "1M"]);
    let port = agent.port_arg();
    let out = nicbench(&["files", "127.0.0.1", "-p", &port, "--generate", "3x1M", "--no-save"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--max-files-bytes") && err.contains("3.15 MB"), "{err}");
    assert!(!err.contains("raw TCP on this path"), "{err}");
    // The agent ran no test at all: no raw TCP trial before the refusal.
    let logs = agent.logs();
    assert!(
        !logs.contains("running tcp test") && !logs.contains("test done"),
        "{logs}"
    );
    assert!(entries(scratch.path()).is_empty());
}
