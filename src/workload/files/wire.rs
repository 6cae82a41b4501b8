//! The `files` transfer protocol on one data connection, without I/O: the
//! frames a sender writes and the checks a receiver makes on every path a
//! peer sends before anything touches the disk.
//!
//! After the connection's preamble the sender writes, per file:
//!
//! ```text
//! header   kind u8 (1 = file)  flags u8 (0)  path_len u16  size u64  path
//! chunks   len u32 (bit 31: zstd-compressed)  bytes      ... until `size` raw bytes
//! trailer  xxh3-128 of the raw contents, 16 bytes
//! ```
//!
//! then `kind 0` (end of the set) and waits for the receiver's answer:
//! `files u64`, `digest u64` (see [`entry_digest`]). A sender that is told
//! to stop in the middle of a file writes the chunk length [`ABORT`]. All
//! integers are big-endian. A chunk holds at most [`MAX_CHUNK`] raw bytes.

/// A file follows.
pub const KIND_FILE: u8 = 1;
/// No more files on this connection.
pub const KIND_END: u8 = 0;
/// A symbolic link: never sent by nicbench, always refused.
pub const KIND_SYMLINK: u8 = 2;
/// Header bytes before the path.
pub const HEADER_LEN: usize = 12;
/// Bytes of the receiver's answer.
pub const ANSWER_LEN: usize = 16;
/// Bit of a chunk length that says the chunk is compressed.
pub const COMPRESSED: u32 = 1 << 31;
/// Chunk length that says the sender gave up on the file (stop, Ctrl-C).
pub const ABORT: u32 = u32::MAX;
/// Most raw bytes in one chunk.
pub const MAX_CHUNK: usize = 1 << 20;
/// Longest path accepted, and longest name of one component.
pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_NAME_BYTES: usize = 255;
/// Most directories above a file (the depth limit): a deeper path is
/// refused before anything is made.
pub const MAX_DEPTH: usize = 16;

/// A file's header as read from the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub path_len: usize,
    pub size: u64,
}

/// Appends a file's header to `out`.
pub fn put_header(out: &mut Vec<u8>, path: &[u8], size: u64) {
    out.push(KIND_FILE);
    out.push(0);
    out.extend_from_slice(&(path.len() as u16).to_be_bytes());
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(path);
}

/// Reads the fixed part of a header (`bytes` is [`HEADER_LEN`] long and
/// starts with [`KIND_FILE`]).
pub fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    let flags = bytes[1];
    if flags != 0 {
        return Err(format!("unknown file flags {flags:#x}"));
    }
    let path_len = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
    let size = u64::from_be_bytes(bytes[4..12].try_into().expect("8 bytes"));
    if path_len == 0 || path_len > MAX_PATH_BYTES {
        return Err(format!("a path of {path_len} bytes (1 to {MAX_PATH_BYTES} allowed)"));
    }
    Ok(Header { path_len, size })
}

/// Shows a peer's path for a message: printable ASCII as is, anything
/// else escaped, at most 200 characters.
pub fn shown(path: &[u8]) -> String {
    let mut s: String = path
        .iter()
        .take(200)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if path.len() > 200 {
        s.push_str("...");
    }
    s
}

/// Checks a path from the peer and splits it into its components: a
/// relative path of plain names, none of them `.` or `..`, no NUL, each
/// name at most 255 bytes, at most [`MAX_DEPTH`] directories above the
/// file. The error says why and names the limit.
pub fn check_path(path: &[u8]) -> Result<Vec<&[u8]>, String> {
    let why = |reason: &str| Err(format!("refused path '{}': {reason}", shown(path)));
    if path.is_empty() {
        return why("it is empty");
    }
    if path.len() > MAX_PATH_BYTES {
        return why(&format!("longer than {MAX_PATH_BYTES} bytes"));
    }
    if path.contains(&0) {
        return why("it contains a NUL byte");
    }
    if path[0] == b'/' {
        return why("it is absolute; only paths inside the scratch directory are written");
    }
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    if parts.len() - 1 > MAX_DEPTH {
        return why(&format!(
            "{} directory levels deep, more than the depth limit of {MAX_DEPTH}",
            parts.len() - 1
        ));
    }
    for part in &parts {
        match *part {
            b"" => return why("it has an empty component (// or a trailing /)"),
            b"." | b".." => return why("it has a '.' or '..' component, which could leave the scratch directory"),
            name if name.len() > MAX_NAME_BYTES => {
                return why(&format!("a name is longer than {MAX_NAME_BYTES} bytes"))
            }
            _ => {}
        }
    }
    Ok(parts)
}

/// What both ends add up per file to check the whole set: the path and the
/// contents' checksum, hashed. Summed (wrapping) over files it does not
/// depend on which connection carried a file or in which order.
pub fn entry_digest(path: &[u8], checksum: u128) -> u64 {
    let mut bytes = Vec::with_capacity(path.len() + 16);
    bytes.extend_from_slice(path);
    bytes.extend_from_slice(&checksum.to_be_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_paths_are_refused_with_the_reason() {
        for (path, reason) in [
            (&b"../x"[..], "'..'"),
            (b"a/../../x", "'..'"),
            (b"/etc/x", "absolute"),
            (b"a//b", "empty component"),
            (b"a/", "empty component"),
            (b"./a", "'.'"),
            (b"a\0b", "NUL"),
            (b"", "empty"),
        ] {
            let err = check_path(path).unwrap_err();
            assert!(err.contains(reason), "{path:?}: {err}");
        }
        let long = vec![b'n'; 256];
        assert!(check_path(&long).unwrap_err().contains("255"));
        let deep = vec!["d"; MAX_DEPTH + 2].join("/");
        let err = check_path(deep.as_bytes()).unwrap_err();
        assert!(
            err.contains("17 directory levels deep") && err.contains("depth limit of 16"),
            "{err}"
        );
        let deepest = vec!["d"; MAX_DEPTH + 1].join("/");
        assert_eq!(check_path(deepest.as_bytes()).unwrap().len(), MAX_DEPTH + 1);
    }

    #[test]
    fn plain_relative_paths_are_split_into_names() {
        assert_eq!(check_path(b"a/b/c.txt").unwrap(), vec![&b"a"[..], b"b", b"c.txt"]);
        assert_eq!(check_path(b"..x").unwrap(), vec![&b"..x"[..]]);
        let name = vec![b'n'; 255];
        assert!(check_path(&name).is_ok());
    }

    #[test]
    fn header_round_trip_and_bad_headers() {
        let mut out = Vec::new();
        put_header(&mut out, b"d/f", 1 << 40);
        assert_eq!(out.len(), HEADER_LEN + 3);
        let h = parse_header(&out[..HEADER_LEN]).unwrap();
        assert_eq!(
            h,
            Header {
                path_len: 3,
                size: 1 << 40
            }
        );
        let mut bad = out.clone();
        bad[1] = 7;
        assert!(parse_header(&bad).unwrap_err().contains("flags"));
        let mut empty = out;
        empty[2] = 0;
        empty[3] = 0;
        assert!(parse_header(&empty).unwrap_err().contains("0 bytes"));
    }

    #[test]
    fn the_set_digest_ignores_order() {
        let a = entry_digest(b"a", 1).wrapping_add(entry_digest(b"b", 2));
        let b = entry_digest(b"b", 2).wrapping_add(entry_digest(b"a", 1));
        assert_eq!(a, b);
        assert_ne!(entry_digest(b"a", 1), entry_digest(b"a", 2));
        assert_eq!(shown(b"a\nb"), "a\\nb");
    }
}
