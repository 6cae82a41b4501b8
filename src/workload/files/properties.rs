//! Property tests of the `files` receiver on arbitrary sender bytes: any
//! input is received or refused with a reason; nothing panics, and the
//! receiver makes no more files than declared, writes no more payload than
//! declared, goes no deeper than the depth limit and leaves nothing
//! behind. The same paths run under libFuzzer in
//! `fuzz/fuzz_targets/files_wire.rs` (bench/fuzz.sh files_wire).

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use proptest::prelude::*;

use super::scratch::{unique_name, Budget, Scratch};
use super::transfer::{receive_files, ReceivePlan};
use super::wire;

/// The sender's bytes in, the receiver's answer out.
struct Peer<'a> {
    input: &'a [u8],
    answer: Vec<u8>,
}

impl Read for Peer<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Peer<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.answer.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Files, payload bytes and the deepest file (directories above it) under `dir`.
fn tally(dir: &Path, depth: usize) -> (u64, u64, usize) {
    let mut total = (0, 0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        assert!(!kind.is_symlink(), "a link was made");
        if kind.is_dir() {
            let (f, b, d) = tally(&entry.path(), depth + 1);
            total = (total.0 + f, total.1 + b, total.2.max(d));
        } else {
            total = (
                total.0 + 1,
                total.1 + entry.metadata().unwrap().len(),
                total.2.max(depth),
            );
        }
    }
    total
}

/// One frame of a plausible sender: a file header with a path of a few
/// names (some hostile), chunks, a checksum; or an end, link or stray byte.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let name = prop_oneof![
        Just(b"d".to_vec()),
        Just(b"..".to_vec()),
        Just(b"".to_vec()),
        proptest::collection::vec(any::<u8>(), 1..8),
    ];
    let path = proptest::collection::vec(name, 1..20).prop_map(|names| names.join(&b'/'));
    let file = (
        path,
        0u64..2000,
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    )
        .prop_map(|(path, size, contents, honest)| {
            let mut out = Vec::new();
            wire::put_header(&mut out, &path, size);
            if !contents.is_empty() {
                out.extend_from_slice(&(contents.len() as u32).to_be_bytes());
                out.extend_from_slice(&contents);
            }
            let checksum = if honest {
                xxhash_rust::xxh3::xxh3_128(&contents)
            } else {
                0
            };
            out.extend_from_slice(&checksum.to_be_bytes());
            out
        });
    prop_oneof![
        4 => file,
        1 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => Just(vec![wire::KIND_END]),
    ]
}

/// Receives `input` into a fresh scratch directory of a 4-file, 1 MiB set
/// (4 MiB on disk) and checks what it left there.
fn receive_and_check(input: &[u8]) -> Result<(), TestCaseError> {
    let budget = Budget::of_set(4, 1 << 20, Some(4 << 20));
    let base = tempfile::tempdir().unwrap();
    let scratch = Arc::new(Scratch::create(base.path(), &unique_name(), false, budget).unwrap());
    let plan = ReceivePlan {
        scratch: Arc::clone(&scratch),
        fsync: false,
    };
    let peer = Peer {
        input,
        answer: Vec::new(),
    };
    let ended = receive_files(peer, &plan, &AtomicU64::new(0));
    let (files, bytes, depth) = tally(scratch.path(), 0);
    prop_assert!(
        files <= budget.files && ended.part.files <= budget.files,
        "{files} files"
    );
    prop_assert!(bytes <= budget.payload_bytes, "{bytes} bytes");
    prop_assert!(depth <= wire::MAX_DEPTH, "{depth} deep");
    let path = scratch.path().to_path_buf();
    drop(plan);
    drop(scratch);
    prop_assert!(!path.exists(), "the scratch directory was left behind");
    Ok(())
}

proptest! {
    #[test]
    fn any_bytes_are_received_or_refused_within_the_budget(input in proptest::collection::vec(any::<u8>(), 0..600)) {
        receive_and_check(&input)?;
    }

    #[test]
    fn any_sequence_of_frames_stays_within_the_declared_set(frames in proptest::collection::vec(frame(), 0..12)) {
        receive_and_check(&frames.concat())?;
    }
}
