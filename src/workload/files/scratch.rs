//! The directory a receiver writes into, and how it writes there: every
//! file is created relative to a directory descriptor, one name at a time,
//! with `O_NOFOLLOW` on every component and `O_EXCL` on the file, so no
//! path a peer sends and no symbolic link planted on the way can lead a
//! write outside it. The directory is removed when the test ends unless
//! the operator asked to keep it.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a receiver writes, and what it may write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Storage {
    /// Parent of the per-test directories; None for the default
    /// ([`default_scratch`]).
    pub scratch: Option<PathBuf>,
    /// Keep the received files after the test.
    pub keep: bool,
    /// Largest set (payload bytes) accepted; None: no limit.
    pub max_files_bytes: Option<u64>,
}

/// `$XDG_CACHE_HOME/nicbench/scratch`, else `~/.cache/nicbench/scratch`,
/// else under the system's temporary directory.
pub fn default_scratch() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        });
    match cache {
        Some(dir) => dir.join("nicbench").join("scratch"),
        None => std::env::temp_dir().join("nicbench-scratch"),
    }
}

/// One test's directory, open.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
    dir: OwnedFd,
    keep: bool,
    /// Payload bytes the test may still write (the declared set, or the
    /// operator's limit): a sender that sends more is stopped.
    left: AtomicU64,
}

fn cstring(name: &[u8]) -> std::io::Result<CString> {
    CString::new(name).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in a name"))
}

/// openat(2) returning an owned descriptor.
fn open_at(dir: &OwnedFd, name: &[u8], flags: i32, mode: libc::mode_t) -> std::io::Result<OwnedFd> {
    let name = cstring(name)?;
    // SAFETY: a valid directory fd and a NUL-terminated name; the returned
    // fd is owned here.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The directory `name` under `dir`, created when missing, never through a
/// symbolic link.
fn subdirectory(dir: &OwnedFd, name: &[u8]) -> std::io::Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: valid fd and NUL-terminated name.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(e);
        }
    }
    open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)
}

impl Scratch {
    /// Creates the directory `name` under `parent` (creating `parent` when
    /// missing); `name` must not exist yet. `budget` is the most payload
    /// the test may write.
    pub fn create(parent: &Path, name: &str, keep: bool, budget: u64) -> std::io::Result<Scratch> {
        std::fs::create_dir_all(parent)?;
        let path = parent.join(name);
        std::fs::create_dir(&path)?;
        let c = cstring(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: a NUL-terminated path; the fd is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Scratch {
            path,
            dir: unsafe { OwnedFd::from_raw_fd(fd) },
            keep,
            left: AtomicU64::new(budget),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes `bytes` from the budget; false (and nothing taken) when the
    /// budget is smaller.
    pub fn reserve(&self, bytes: u64) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(bytes))
            .is_ok()
    }

    /// Opens the directory holding a file at `components` (all but the
    /// last are directories, created as needed) and returns it.
    pub fn directory_of(&self, components: &[&[u8]]) -> std::io::Result<OwnedFd> {
        let mut dir = self.dir.try_clone()?;
        for name in &components[..components.len().saturating_sub(1)] {
            dir = subdirectory(&dir, name)?;
        }
        Ok(dir)
    }

    /// Creates the new file `name` in `dir` (from [`Scratch::directory_of`]);
    /// fails when anything of that name exists, a symbolic link included.
    pub fn create_file(dir: &OwnedFd, name: &[u8]) -> std::io::Result<File> {
        let fd = open_at(
            dir,
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o600,
        )?;
        Ok(File::from(fd))
    }

    /// Removes the file `name` of `dir` (a partial file).
    pub fn remove_file(dir: &OwnedFd, name: &[u8]) -> std::io::Result<()> {
        let c = cstring(name)?;
        // SAFETY: valid fd and NUL-terminated name.
        match unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            log::info!("kept the received files in {}", self.path.display());
            return;
        }
        // remove_dir_all does not follow symbolic links.
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            log::warn!("could not remove the scratch directory {}: {e}", self.path.display());
        }
    }
}

/// A name for one test's directory that no other test of this host uses.
pub fn unique_name() -> String {
    let token = crate::protocol::new_token();
    let hex: String = token[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("files-{}-{hex}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_created_inside_and_the_directory_removed_afterwards() {
        let base = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "t", false, 100).unwrap();
        let dir = scratch.directory_of(&[b"a", b"b", b"f"]).unwrap();
        let mut f = Scratch::create_file(&dir, b"f").unwrap();
        std::io::Write::write_all(&mut f, b"hello").unwrap();
        assert_eq!(std::fs::read(base.path().join("t/a/b/f")).unwrap(), b"hello");
        // Twice the same name: refused, the first file untouched.
        assert!(Scratch::create_file(&dir, b"f").is_err());
        assert!(scratch.reserve(60) && !scratch.reserve(60) && scratch.reserve(40));
        drop(scratch);
        assert!(!base.path().join("t").exists());
    }

    #[test]
    fn a_symlink_planted_on_the_way_is_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "t", false, u64::MAX).unwrap();
        std::os::unix::fs::symlink(outside.path(), scratch.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), scratch.path().join("file")).unwrap();
        assert!(scratch.directory_of(&[b"link", b"x"]).is_err());
        let dir = scratch.directory_of(&[b"file"]).unwrap();
        assert!(Scratch::create_file(&dir, b"file").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
