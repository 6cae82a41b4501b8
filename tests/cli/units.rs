//! Numbers on the command line (issue 31): a size or rate past the largest
//! u64 is refused as overflow, never clamped; every numeric option is
//! refused by its own name with its real range, before anything connects
//! (exit 2).

use super::common::*;

/// Runs `nicbench ARGS` against a port nobody needs to listen on and
/// returns its stderr, after checking it exited 2 (a usage error).
fn refused(args: &[&str]) -> String {
    let out = nicbench(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    err
}

fn assert_says(args: &[&str], needles: &[&str]) {
    let err = refused(args);
    for needle in needles {
        assert!(err.contains(needle), "{args:?} should say {needle:?}: {err}");
    }
}

#[test]
fn sizes_and_rates_past_the_largest_u64_are_refused_as_overflow_never_clamped() {
    let largest = "18446744073709551615 B";
    assert_says(
        &["tcp", "127.0.0.1", "-p", "1", "-l", "99999999999G"],
        &[
            "--length",
            "1.1e20 bytes is more than the largest size, 18446744073709551615 B",
        ],
    );
    assert_says(
        &["tcp", "127.0.0.1", "-p", "1", "-n", "18446744073709551616"],
        &["--bytes", "1.8e19 bytes is more than the largest size", largest],
    );
    assert_says(
        &["tcp", "127.0.0.1", "-p", "1", "-l", "18446744073709551616"],
        &["--length", "more than the largest size"],
    );
    assert_says(
        &["files", "127.0.0.1", "-p", "1", "--generate", "1x99999999999G"],
        &["--generate", "1.1e20 bytes is more than the largest size"],
    );
    assert_says(
        &["files", "127.0.0.1", "-p", "1", "--generate", "3x8000000000GB"],
        &["--generate", "3 files of", "more than the largest size"],
    );
    assert_says(
        &["udp", "127.0.0.1", "-p", "1", "-b", "18446744073709551616"],
        &["--bitrate", "more than the largest rate"],
    );
    assert_says(
        &["serve", "--max-files-bytes", "99999999999G"],
        &["--max-files-bytes", "more than the largest size"],
    );
}

#[test]
fn each_option_is_refused_by_its_own_name_with_its_real_range() {
    for (args, name, range) in [
        (
            &["rr", "-r", "65M,1"][..],
            "--sizes",
            "the request size must be from 1 B to 64 MiB (got 65 MiB)",
        ),
        (
            &["sweep", "--max", "1G"],
            "--max",
            "must be from 1 B to 64 MiB (got 1024 MiB)",
        ),
        (&["sweep", "--sizes", "1,1G"], "--sizes", "from 1 B to 64 MiB"),
        (
            &["rr", "--burst", "99999999999"],
            "--burst",
            "must be a whole number from 1 to 1024",
        ),
        (
            &["rr", "--busy-poll", "4294967295"],
            "--busy-poll",
            "from 0 to 2147483647",
        ),
        (&["tcp", "--mss", "99999999999"], "--mss", "from 88 to 65495"),
        (&["udp", "-l", "70000"], "--length", "must be from 28 B to 65507 B"),
        (
            &["files", "--generate", "1x1K", "-l", "2M"],
            "--length",
            "must be from 1 B to 1 MiB",
        ),
        (&["tcp", "-w", "2G"], "--window", "must be from 1 B to 1024 MiB"),
        (
            &["tcp", "-i", "0.01"],
            "--interval",
            "must be from 50 ms to 24 h (got 10 ms)",
        ),
        (&["tcp", "-O", "25h"], "--omit", "must be from 0 s to 24 h (got 25 h)"),
        (&["tcp", "--wait", "2h"], "--wait", "must be from 0 s to 1 h (got 2 h)"),
        (&["sweep", "--passes", "11"], "--passes", "from 1 to 10"),
        (&["sweep", "--point-time", "2min"], "--point-time", "from 1 ms to 1 min"),
    ] {
        let mut all = vec![args[0], "127.0.0.1", "-p", "1", "--no-save"];
        all.extend_from_slice(&args[1..]);
        let err = refused(&all);
        assert!(err.contains(name) && err.contains(range), "{args:?}: {err}");
        assert!(!err.contains("4294967295") || name == "--busy-poll", "{args:?}: {err}");
        if name != "--length" {
            assert!(!err.contains("--length"), "{args:?} names another option: {err}");
        }
    }
}

#[test]
fn a_test_shorter_than_the_runner_can_measure_is_refused_and_nothing_saved() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let err = refused(&[
        "tcp",
        "127.0.0.1",
        "-p",
        "1",
        "-t",
        "0.0000001",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(
        err.contains("--time") && err.contains("must be from 50 ms to 24 h (got 100 ns)"),
        "{err}"
    );
    assert!(!db.exists(), "nothing saved");
}
