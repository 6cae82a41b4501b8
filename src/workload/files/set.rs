//! The set of files a test moves: generated (`13x1.9G`, `200000x8K`,
//! `mixed`), described by a few numbers both ends can expand the same way,
//! or a real directory tree on the sending host. Generated contents come
//! from a fast pseudo-random generator, with a share of each 4 KiB page
//! left zero so that a compressor shrinks it to about `1 - compressibility`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Files of `mixed`: sizes spread evenly on a log scale from 1 KiB to 16 MiB.
pub const MIXED_FILES: u64 = 1000;
const MIXED_MIN: f64 = 1024.0;
const MIXED_MAX: f64 = 16.0 * 1024.0 * 1024.0;
/// Files per generated directory.
pub const FILES_PER_DIRECTORY: u64 = 1000;
/// Most files in one set.
pub const MAX_FILES: u64 = 10_000_000;

/// Where the files come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// `count` files of `file_bytes` each.
    Generated { count: u64, file_bytes: u64 },
    /// [`MIXED_FILES`] files of sizes from 1 KiB to 16 MiB.
    Mixed,
    /// A directory tree on the client (`--from`).
    Directory { path: String },
}

impl Source {
    /// Parses `--generate`: `COUNTxSIZE` (`13x1.9G`, `200000x8K`) or `mixed`.
    pub fn parse_generate(s: &str) -> Result<Source, String> {
        if s.eq_ignore_ascii_case("mixed") {
            return Ok(Source::Mixed);
        }
        let hint = "expected COUNTxSIZE such as 13x1.9G or 200000x8K, or 'mixed'";
        let (count, size) = s.split_once(['x', 'X']).ok_or_else(|| format!("'{s}': {hint}"))?;
        let count: u64 = count
            .trim()
            .parse()
            .map_err(|_| format!("'{s}': the count '{count}' is not a whole number; {hint}"))?;
        if count == 0 || count > MAX_FILES {
            return Err(format!("'{s}': the count must be 1 to {MAX_FILES}"));
        }
        let file_bytes = crate::units::parse_size_rounded(size.trim()).map_err(|e| format!("'{s}': {}", e.hint))?;
        if count.checked_mul(file_bytes).is_none() {
            return Err(format!(
                "'{s}': {count} files of {file_bytes} B make {:.1e} bytes, more than the largest size, {} B",
                count as f64 * file_bytes as f64,
                u64::MAX
            ));
        }
        Ok(Source::Generated { count, file_bytes })
    }

    /// Files and payload bytes of a generated set (None for a directory).
    pub fn generated_totals(&self) -> Option<(u64, u64)> {
        match self {
            Source::Generated { count, file_bytes } => Some((*count, count.saturating_mul(*file_bytes))),
            Source::Mixed => Some((MIXED_FILES, (0..MIXED_FILES).map(mixed_size).sum())),
            Source::Directory { .. } => None,
        }
    }

    /// Path and size of generated file `index`.
    pub fn generated_file(&self, index: u64) -> (Vec<u8>, u64) {
        let size = match self {
            Source::Generated { file_bytes, .. } => *file_bytes,
            _ => mixed_size(index),
        };
        let path = format!("d{:05}/f{index:08}", index / FILES_PER_DIRECTORY);
        (path.into_bytes(), size)
    }
}

/// Size of file `index` of `mixed`: a fixed pseudo-random log-uniform spread.
fn mixed_size(index: u64) -> u64 {
    let unit = (splitmix(index ^ 0x006d_6978_6564) >> 11) as f64 / (1u64 << 53) as f64;
    (MIXED_MIN * (MIXED_MAX / MIXED_MIN).powf(unit)).round() as u64
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Fills `buffer` with the contents of a generated file starting at byte
/// `offset` of it: in each 4 KiB page, the first `1 - compressibility`
/// share is pseudo-random, the rest zero.
pub fn generate(buffer: &mut [u8], file: u64, offset: u64, compressibility: f64) {
    const PAGE: usize = 4096;
    let random = ((1.0 - compressibility.clamp(0.0, 1.0)) * PAGE as f64).round() as usize;
    let mut state = splitmix(file.wrapping_mul(0x1000_0000_01b3) ^ offset);
    let mut at = 0usize;
    let mut page_offset = (offset % PAGE as u64) as usize;
    while at < buffer.len() {
        let take = (PAGE - page_offset).min(buffer.len() - at);
        let chunk = &mut buffer[at..at + take];
        let random_here = random.saturating_sub(page_offset).min(take);
        let (noise, zeros) = chunk.split_at_mut(random_here);
        for word in noise.chunks_mut(8) {
            // xorshift64*: a few instructions per 8 bytes.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let value = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
            word.copy_from_slice(&value[..word.len()]);
        }
        zeros.fill(0);
        at += take;
        page_offset = 0;
    }
}

/// One regular file of a directory tree, relative to its root.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: Vec<u8>,
    pub size: u64,
}

/// What walking a tree found besides regular files.
#[derive(Debug, Default, Clone)]
pub struct Walked {
    pub entries: Vec<Entry>,
    pub skipped_symlinks: u64,
    pub skipped_other: u64,
}

/// Lists the regular files under `root`, sorted by path; symbolic links
/// and special files are counted and skipped (never followed).
pub fn walk(root: &Path) -> std::io::Result<Walked> {
    use std::os::unix::ffi::OsStrExt;
    let mut walked = Walked::default();
    let mut pending: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        for entry in std::fs::read_dir(root.join(&relative))? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = relative.join(entry.file_name());
            if kind.is_symlink() {
                walked.skipped_symlinks += 1;
            } else if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let size = entry.metadata()?.len();
                walked.entries.push(Entry {
                    path: path.as_os_str().as_bytes().to_vec(),
                    size,
                });
            } else {
                walked.skipped_other += 1;
            }
        }
    }
    walked.entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(walked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_specs_parse() {
        assert_eq!(
            Source::parse_generate("13x1.9G").unwrap(),
            Source::Generated {
                count: 13,
                file_bytes: (1.9 * (1u64 << 30) as f64).round() as u64
            }
        );
        assert_eq!(
            Source::parse_generate("200000x8K").unwrap(),
            Source::Generated {
                count: 200_000,
                file_bytes: 8192
            }
        );
        assert_eq!(Source::parse_generate("MIXED").unwrap(), Source::Mixed);
        assert!(Source::parse_generate("0x1K").unwrap_err().contains("count"));
        assert!(Source::parse_generate("10").unwrap_err().contains("COUNTxSIZE"));
        assert!(Source::parse_generate("10xfoo").is_err());
        // Issue 31: never an 18.4 EB file.
        let err = Source::parse_generate("1x99999999999G").unwrap_err();
        assert!(err.contains("1.1e20 bytes is more than the largest size"), "{err}");
        let err = Source::parse_generate("3x8000000000GB").unwrap_err();
        assert!(
            err.contains("3 files of") && err.contains("more than the largest size"),
            "{err}"
        );
    }

    #[test]
    fn mixed_is_the_same_set_everywhere_and_spans_its_range() {
        let (files, bytes) = Source::Mixed.generated_totals().unwrap();
        assert_eq!(files, MIXED_FILES);
        let sizes: Vec<u64> = (0..MIXED_FILES).map(|i| Source::Mixed.generated_file(i).1).collect();
        assert_eq!(sizes.iter().sum::<u64>(), bytes);
        assert!(*sizes.iter().min().unwrap() >= 1024 && *sizes.iter().max().unwrap() <= 16 << 20);
        assert!(
            sizes.iter().filter(|&&s| s < 64 * 1024).count() > 300,
            "small files dominate the count"
        );
    }

    #[test]
    fn generated_contents_compress_as_asked() {
        let mut whole = vec![0u8; 1 << 20];
        generate(&mut whole, 7, 0, 0.75);
        let mut pieces = vec![0u8; 1 << 20];
        let (a, b) = pieces.split_at_mut(5000);
        generate(a, 7, 0, 0.75);
        generate(b, 7, 5000, 0.75);
        assert_eq!(&whole[..4096], &pieces[..4096], "the first page");
        let zeros = whole.iter().filter(|&&b| b == 0).count() as f64 / whole.len() as f64;
        assert!((0.74..0.77).contains(&zeros), "{zeros}");
        let packed = zstd::bulk::compress(&whole, 1).unwrap();
        let ratio = packed.len() as f64 / whole.len() as f64;
        assert!((0.2..0.3).contains(&ratio), "compressed to {ratio}");
        let mut noise = vec![0u8; 1 << 20];
        generate(&mut noise, 8, 0, 0.0);
        assert!(zstd::bulk::compress(&noise, 1).unwrap().len() > noise.len() * 99 / 100);
    }
}
