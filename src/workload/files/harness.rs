//! The `files` receiver driven by arbitrary sender bytes, for the property
//! tests (src/workload/files/properties.rs) and the libFuzzer target
//! (fuzz/fuzz_targets/files_wire.rs), which check the same promises: any
//! input is received or refused, and the receiver makes no more files
//! than declared, writes no more payload than declared, goes no deeper
//! than the depth limit and leaves nothing behind.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

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

/// Files, payload bytes and the deepest file (directories above it) under
/// `dir`; an error for a link, which the receiver never makes.
fn tally(dir: &Path, depth: usize) -> io::Result<(u64, u64, usize)> {
    let mut total = (0, 0, 0);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            return Err(io::Error::other(format!("a link was made: {}", entry.path().display())));
        }
        if kind.is_dir() {
            let (f, b, d) = tally(&entry.path(), depth + 1)?;
            total = (total.0 + f, total.1 + b, total.2.max(d));
        } else {
            total = (total.0 + 1, total.1 + entry.metadata()?.len(), total.2.max(depth));
        }
    }
    Ok(total)
}

/// Receives `input` into a fresh scratch directory under `parent` for a
/// 4-file, 1 MiB set (4 MiB on disk) and checks what it left there: the
/// first broken promise, in words.
pub fn receive_and_check(input: &[u8], parent: &Path) -> Result<(), String> {
    let budget = Budget::of_set(4, 1 << 20, Some(4 << 20));
    let scratch = Scratch::create(parent, &unique_name(), false, budget).map_err(|e| e.to_string())?;
    let scratch = Arc::new(scratch);
    let plan = ReceivePlan {
        scratch: Arc::clone(&scratch),
        fsync: false,
    };
    let peer = Peer {
        input,
        answer: Vec::new(),
    };
    let ended = receive_files(peer, &plan, &AtomicU64::new(0));
    let (files, bytes, depth) = tally(scratch.path(), 0).map_err(|e| e.to_string())?;
    if files > budget.files || ended.part.files > budget.files {
        return Err(format!(
            "{files} files made, {} counted, of {} declared",
            ended.part.files, budget.files
        ));
    }
    if bytes > budget.payload_bytes {
        return Err(format!("{bytes} bytes written, {} declared", budget.payload_bytes));
    }
    if depth > wire::MAX_DEPTH {
        return Err(format!(
            "a file {depth} directories deep, the limit is {}",
            wire::MAX_DEPTH
        ));
    }
    let path = scratch.path().to_path_buf();
    drop(plan);
    drop(scratch);
    if path.exists() {
        return Err(format!("the scratch directory {} was left behind", path.display()));
    }
    Ok(())
}
