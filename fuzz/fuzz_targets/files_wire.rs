//! The `files` receiver on arbitrary bytes from a sender: headers, paths,
//! chunks (raw, compressed, aborted), checksums and end marks, written into
//! a real scratch directory under a small budget. Nothing here may panic
//! or loop forever, and whatever the bytes, the receiver makes no more
//! files than declared, writes no more payload than declared, goes no
//! deeper than the depth limit and leaves nothing behind. The stable
//! property tests in src/workload/files/properties.rs run the same paths.
#![no_main]

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use nicbench::workload::files::scratch::{unique_name, Budget, Scratch};
use nicbench::workload::files::transfer::{receive_files, ReceivePlan};
use nicbench::workload::files::wire;

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

/// Files, payload bytes and the deepest file under `dir`.
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

fuzz_target!(|data: &[u8]| {
    let _ = wire::shown(data);
    if let Ok(parts) = wire::check_path(data) {
        assert!(parts.len() <= wire::MAX_DEPTH + 1);
    }
    if data.len() >= wire::HEADER_LEN {
        if let Ok(header) = wire::parse_header(&data[..wire::HEADER_LEN]) {
            assert!(header.path_len >= 1 && header.path_len <= wire::MAX_PATH_BYTES);
        }
    }
    let budget = Budget::of_set(4, 1 << 20, Some(4 << 20));
    let parent = std::env::temp_dir().join("nicbench-fuzz-files");
    let scratch = Arc::new(Scratch::create(&parent, &unique_name(), false, budget).unwrap());
    let plan = ReceivePlan {
        scratch: Arc::clone(&scratch),
        fsync: false,
    };
    let peer = Peer {
        input: data,
        answer: Vec::new(),
    };
    let ended = receive_files(peer, &plan, &AtomicU64::new(0));
    let (files, bytes, depth) = tally(scratch.path(), 0);
    assert!(files <= budget.files && ended.part.files <= budget.files);
    assert!(bytes <= budget.payload_bytes);
    assert!(depth <= wire::MAX_DEPTH);
    let path = scratch.path().to_path_buf();
    drop(plan);
    drop(scratch);
    assert!(!path.exists(), "the scratch directory was left behind");
});
