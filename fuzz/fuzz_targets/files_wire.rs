//! The `files` receiver on arbitrary bytes from a sender: headers, paths,
//! chunks (raw, compressed, aborted), checksums and end marks, written into
//! a real scratch directory under a small budget. Nothing here may panic
//! or loop forever, and whatever the bytes, the receiver makes no more
//! files than declared, writes no more payload than declared, goes no
//! deeper than the depth limit and leaves nothing behind. The stable
//! property tests in src/workload/files/properties.rs run the same paths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nicbench::workload::files::{harness, wire};

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
    let parent = std::env::temp_dir().join("nicbench-fuzz-files");
    std::fs::create_dir_all(&parent).unwrap();
    if let Err(broken) = harness::receive_and_check(data, &parent) {
        panic!("{broken}");
    }
});
