//! Property tests of the `files` receiver on arbitrary sender bytes: any
//! input is received or refused with a reason; nothing panics, and the
//! receiver makes no more files than declared, writes no more payload than
//! declared, goes no deeper than the depth limit and leaves nothing
//! behind. The same paths run under libFuzzer in
//! `fuzz/fuzz_targets/files_wire.rs` (bench/fuzz.sh files_wire).

use proptest::prelude::*;

use super::harness;
use super::wire;

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

/// [`harness::receive_and_check`] in a temporary directory.
fn receive_and_check(input: &[u8]) -> Result<(), TestCaseError> {
    let base = tempfile::tempdir().unwrap();
    harness::receive_and_check(input, base.path()).map_err(TestCaseError::fail)
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
