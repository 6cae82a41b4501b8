//! The directory a receiver writes into, and how it writes there: every
//! file is created relative to a directory descriptor, one name at a time,
//! with `O_NOFOLLOW` on every component and `O_EXCL` on the file, so no
//! path a peer sends and no symbolic link planted on the way can lead a
//! write outside it. Every entry a peer makes is charged against the
//! test's [`Budget`]: each file against the declared count and payload,
//! and each file and directory, with its name and metadata, against the
//! bytes on disk the test may take. The directory is removed when the test
//! ends unless the operator asked to keep it.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::units::{Bytes, Size};

/// Bytes on disk charged for every entry (a file or a directory) besides
/// its name: its inode and directory entry.
pub const ENTRY_BYTES: u64 = 256;
/// Bytes on disk charged for every directory on top of its entry: the
/// block its own entries take, as ext4 and xfs allocate one.
pub const DIRECTORY_BYTES: u64 = 4096;

/// Where a receiver writes, and what it may write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Storage {
    /// Parent of the per-test directories; None for the default
    /// ([`default_scratch`]).
    pub scratch: Option<PathBuf>,
    /// Keep the received files after the test.
    pub keep: bool,
    /// Most bytes on disk one test may take, its files' and directories'
    /// entries charged ([`ENTRY_BYTES`], [`DIRECTORY_BYTES`]); None: no
    /// limit beyond the declared set's.
    pub max_files_bytes: Option<u64>,
    /// Remove a test's directory on a thread of its own after the test,
    /// so its slot is free at once (the agent, a long-lived process);
    /// else before the test's end returns (the client, which then exits).
    pub remove_in_background: bool,
}

/// Most files one test may declare unless the operator says otherwise
/// (`--max-files-bytes` bounds the bytes, this the count).
pub const DEFAULT_MAX_FILES: u64 = 1_000_000;

/// What the filesystem holding a directory has free: bytes an
/// unprivileged writer may use, and inodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Free {
    pub bytes: u64,
    pub inodes: u64,
}

/// [`Free`] of the filesystem holding `dir` (statvfs(3)).
pub fn free_space(dir: &Path) -> std::io::Result<Free> {
    let c = cstring(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: statvfs writes into the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Free {
        bytes: (st.f_bavail as u64).saturating_mul(st.f_frsize as u64),
        inodes: st.f_favail as u64,
    })
}

/// Checks a declared set of `files` and `least_disk_bytes` against what
/// one test may take of a filesystem with `free`: at most half its free
/// bytes and half its free inodes (so a test never fills the disk other
/// work lives on), and at most [`DEFAULT_MAX_FILES`] files. A filesystem
/// that reports no inode count (0) is held to bytes only.
pub fn check_room(files: u64, least_disk_bytes: u64, free: Free, dir: &Path) -> Result<(), String> {
    if files > DEFAULT_MAX_FILES {
        return Err(format!(
            "the set holds {files} files; this agent accepts at most {DEFAULT_MAX_FILES} per test: send fewer, \
             larger files"
        ));
    }
    if free.inodes > 0 && files > free.inodes / 2 {
        return Err(format!(
            "the set holds {files} files, and the filesystem of {} has {} free inodes: a test may take at most \
             half of them; send fewer files, or start the agent with another --scratch",
            dir.display(),
            free.inodes
        ));
    }
    if least_disk_bytes > free.bytes / 2 {
        return Err(format!(
            "the set takes at least {} on disk, and the filesystem of {} has {} free: a test may take at most \
             half of it; send a smaller set, or start the agent with another --scratch",
            Bytes(least_disk_bytes),
            dir.display(),
            Bytes(free.bytes)
        ));
    }
    Ok(())
}

/// What one test may write: the set its sender declared (files and
/// payload) and the bytes on disk that set may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Files the sender declared.
    pub files: u64,
    /// Payload bytes the sender declared.
    pub payload_bytes: u64,
    /// Bytes on disk: payload, plus [`ENTRY_BYTES`] and the name of every
    /// file and directory, plus [`DIRECTORY_BYTES`] per directory.
    pub disk_bytes: u64,
    /// Whether `disk_bytes` is the operator's `--max-files-bytes` (else it
    /// is the most the declared set can take).
    pub operator_limit: bool,
}

impl Budget {
    /// The budget of a declared set of `files` holding `payload_bytes`:
    /// on disk at most its payload plus, per file, its entry and
    /// [`super::wire::MAX_DEPTH`] directories of the longest names, or the
    /// operator's `max_disk_bytes` when that is less.
    pub fn of_set(files: u64, payload_bytes: u64, max_disk_bytes: Option<u64>) -> Budget {
        let name = super::wire::MAX_NAME_BYTES as u64;
        let per_file = (ENTRY_BYTES + name) + super::wire::MAX_DEPTH as u64 * (DIRECTORY_BYTES + ENTRY_BYTES + name);
        let declared = payload_bytes.saturating_add(files.saturating_mul(per_file));
        let (disk_bytes, operator_limit) = match max_disk_bytes {
            Some(max) if max < declared => (max, true),
            _ => (declared, false),
        };
        Budget {
            files,
            payload_bytes,
            disk_bytes,
            operator_limit,
        }
    }

    /// The least the declared set takes on disk: its payload and one
    /// entry per file.
    pub fn least_disk_bytes(files: u64, payload_bytes: u64) -> u64 {
        payload_bytes.saturating_add(files.saturating_mul(ENTRY_BYTES))
    }

    /// No limit (for tests of the transfer itself).
    pub fn unlimited() -> Budget {
        Budget {
            files: u64::MAX,
            payload_bytes: u64::MAX,
            disk_bytes: u64::MAX,
            operator_limit: false,
        }
    }

    /// The disk limit in words, for a refusal.
    fn disk_limit(&self) -> String {
        let how = format!(
            "each file and directory counts {} besides its name, each directory {} more",
            Size(ENTRY_BYTES),
            Size(DIRECTORY_BYTES)
        );
        if self.operator_limit {
            format!(
                "the {} this agent accepts per test on disk (its --max-files-bytes; {how})",
                Bytes(self.disk_bytes)
            )
        } else {
            format!(
                "the {} the declared set of {} files may take on disk ({how})",
                Bytes(self.disk_bytes),
                self.files
            )
        }
    }
}

/// Why an entry was not made in the scratch directory.
#[derive(Debug)]
pub enum EntryError {
    /// A limit of the test's [`Budget`]; says which.
    Limit(String),
    /// The filesystem's error.
    Io(std::io::Error),
}

impl From<std::io::Error> for EntryError {
    fn from(e: std::io::Error) -> Self {
        EntryError::Io(e)
    }
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
    remove_in_background: bool,
    budget: Budget,
    /// What the test may still write (from `budget`): a sender that sends
    /// more is stopped.
    files_left: AtomicU64,
    payload_left: AtomicU64,
    disk_left: AtomicU64,
}

/// Takes `n` from `left`; false (and nothing taken) when less is left.
fn take(left: &AtomicU64, n: u64) -> bool {
    left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(n))
        .is_ok()
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

/// mkdirat(2): Ok(true) when `name` was created, Ok(false) when something
/// of that name exists.
fn make_directory(dir: &OwnedFd, name: &[u8]) -> std::io::Result<bool> {
    let c = cstring(name)?;
    // SAFETY: valid fd and NUL-terminated name.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.kind() {
        std::io::ErrorKind::AlreadyExists => Ok(false),
        _ => Err(e),
    }
}

impl Scratch {
    /// Creates the directory `name` under `parent` (creating `parent` when
    /// missing); `name` must not exist yet. `budget` is what the test may
    /// write there.
    pub fn create(parent: &Path, name: &str, keep: bool, budget: Budget) -> std::io::Result<Scratch> {
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
            remove_in_background: false,
            budget,
            files_left: AtomicU64::new(budget.files),
            payload_left: AtomicU64::new(budget.payload_bytes),
            disk_left: AtomicU64::new(budget.disk_bytes),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory on a thread of its own when dropped
    /// ([`Storage::remove_in_background`]).
    pub fn removed_in_background(mut self, yes: bool) -> Scratch {
        self.remove_in_background = yes;
        self
    }

    /// Charges a file of `size` bytes named `name` (its last component)
    /// to the budget: one of the declared files, `size` of the declared
    /// payload, and its size, entry and name on disk. The error names the
    /// limit it would pass; nothing is taken then.
    pub fn charge_file(&self, name: &[u8], size: u64) -> Result<(), String> {
        let b = &self.budget;
        if !take(&self.files_left, 1) {
            return Err(format!(
                "the sender declared {} file(s) for this test and sent more (the declared count is a limit)",
                b.files
            ));
        }
        if !take(&self.payload_left, size) {
            self.files_left.fetch_add(1, Ordering::Relaxed);
            return Err(format!(
                "the set would exceed the {} declared for this test (the declared size is a limit)",
                Bytes(b.payload_bytes)
            ));
        }
        let disk = size.saturating_add(ENTRY_BYTES + name.len() as u64);
        if !take(&self.disk_left, disk) {
            self.files_left.fetch_add(1, Ordering::Relaxed);
            self.payload_left.fetch_add(size, Ordering::Relaxed);
            return Err(format!(
                "the files and directories would take more than {}",
                b.disk_limit()
            ));
        }
        Ok(())
    }

    /// Opens the directory holding a file at `components` (all but the
    /// last are directories, created as needed, each new one charged on
    /// disk) and returns it.
    pub fn directory_of(&self, components: &[&[u8]]) -> Result<OwnedFd, EntryError> {
        let mut dir = self.dir.try_clone()?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        for name in &components[..components.len().saturating_sub(1)] {
            // There already (another file's): no new cost.
            match open_at(&dir, name, flags, 0) {
                Ok(existing) => {
                    dir = existing;
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
            let cost = DIRECTORY_BYTES + ENTRY_BYTES + name.len() as u64;
            if !take(&self.disk_left, cost) {
                return Err(EntryError::Limit(format!(
                    "the files and directories would take more than {}",
                    self.budget.disk_limit()
                )));
            }
            match make_directory(&dir, name) {
                Ok(true) => {}
                // Made by another connection meanwhile: charged there.
                Ok(false) => {
                    self.disk_left.fetch_add(cost, Ordering::Relaxed);
                }
                Err(e) => {
                    self.disk_left.fetch_add(cost, Ordering::Relaxed);
                    return Err(e.into());
                }
            }
            dir = open_at(&dir, name, flags, 0)?;
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
        let path = match self.remove_in_background {
            // Renamed at once, so the name is free and nobody mistakes it
            // for a test's; removed by a thread while the next test runs.
            true => {
                let trash = self.path.with_file_name(format!(
                    ".removing-{}",
                    self.path.file_name().map_or("files".into(), |n| n.to_string_lossy())
                ));
                match std::fs::rename(&self.path, &trash) {
                    Ok(()) => trash,
                    Err(_) => self.path.clone(),
                }
            }
            false => self.path.clone(),
        };
        let remove = move || {
            // remove_dir_all does not follow symbolic links.
            if let Err(e) = std::fs::remove_dir_all(&path) {
                log::warn!("could not remove the scratch directory {}: {e}", path.display());
            }
        };
        match self.remove_in_background {
            true => {
                let removal = Removal::begin();
                let spawned = std::thread::Builder::new()
                    .name("scratch-removal".into())
                    .spawn(move || {
                        remove();
                        drop(removal);
                    });
                if let Err(e) = spawned {
                    log::warn!("could not start the removal of {}: {e}", self.path.display());
                }
            }
            false => remove(),
        }
    }
}

/// Earlier tests' directories still being removed in the background, and
/// the condition their removers signal when done.
static REMOVALS: (std::sync::Mutex<usize>, std::sync::Condvar) = (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// One background removal in flight, counted in [`REMOVALS`] until dropped.
struct Removal;

impl Removal {
    fn begin() -> Removal {
        *REMOVALS.0.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Removal
    }
}

impl Drop for Removal {
    fn drop(&mut self) {
        let mut pending = REMOVALS.0.lock().unwrap_or_else(|p| p.into_inner());
        *pending = pending.saturating_sub(1);
        REMOVALS.1.notify_all();
    }
}

/// What a receiver did before its test so that earlier tests' disk work
/// does not run inside this one's time (issue 72 item 8: the same small-
/// files test read 86% of raw TCP in one run and 7-10% in the next, while
/// the previous test's directory was being removed and its writes flushed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settled {
    /// Seconds spent waiting for earlier tests' directories to go.
    pub removal_wait_seconds: f64,
    /// Removals still running when the wait gave up (0 when all finished).
    pub removals_pending: usize,
    /// Seconds syncfs(2) took to write back the filesystem's dirty data.
    pub writeback_seconds: f64,
    /// Whether that write-back finished within its limit.
    pub writeback_done: bool,
}

impl Settled {
    /// A sentence for the log when settling took noticeable time or did
    /// not finish; None when the disk was quiet.
    pub fn note(&self, dir: &Path) -> Option<String> {
        let mut parts = Vec::new();
        if self.removals_pending > 0 {
            parts.push(format!(
                "{} earlier test directories were still being removed after {:.1} s (their work overlaps this test)",
                self.removals_pending, self.removal_wait_seconds
            ));
        } else if self.removal_wait_seconds >= 0.05 {
            parts.push(format!(
                "waited {:.2} s for an earlier test's directory to be removed",
                self.removal_wait_seconds
            ));
        }
        if !self.writeback_done {
            parts.push(format!(
                "writing back the filesystem's dirty data did not finish in {:.1} s (it overlaps this test)",
                self.writeback_seconds
            ));
        } else if self.writeback_seconds >= 0.05 {
            parts.push(format!(
                "wrote back earlier writes in {:.2} s (syncfs)",
                self.writeback_seconds
            ));
        }
        (!parts.is_empty()).then(|| format!("before receiving into {}: {}", dir.display(), parts.join("; ")))
    }
}

/// Waits (at most `limit` each) for this process's earlier background
/// removals to finish, then writes back the dirty data of the filesystem
/// holding `dir` (syncfs(2), on a thread, since it cannot be interrupted),
/// so the test about to run pays neither.
pub fn settle(dir: &Path, limit: std::time::Duration) -> Settled {
    let start = std::time::Instant::now();
    let pending = {
        let guard = REMOVALS.0.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = REMOVALS
            .1
            .wait_timeout_while(guard, limit, |pending| *pending > 0)
            .unwrap_or_else(|p| p.into_inner());
        *guard
    };
    let removal_wait_seconds = start.elapsed().as_secs_f64();
    let start = std::time::Instant::now();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let target = dir.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("scratch-syncfs".into())
        .spawn(move || {
            if let Ok(d) = File::open(&target) {
                // SAFETY: syncfs takes any open descriptor of the filesystem.
                unsafe { libc::syncfs(d.as_raw_fd()) };
            }
            let _ = done_tx.send(());
        });
    let writeback_done = spawned.is_ok() && done_rx.recv_timeout(limit).is_ok();
    Settled {
        removal_wait_seconds,
        removals_pending: pending,
        writeback_seconds: start.elapsed().as_secs_f64(),
        writeback_done,
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
    fn settling_waits_for_an_earlier_background_removal() {
        let base = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "earlier", false, Budget::unlimited())
            .unwrap()
            .removed_in_background(true);
        let dir = scratch.directory_of(&[b"d"]).unwrap();
        for i in 0..2000 {
            drop(Scratch::create_file(&dir, format!("f{i}").as_bytes()).unwrap());
        }
        drop(dir);
        drop(scratch);
        let settled = settle(base.path(), std::time::Duration::from_secs(60));
        assert_eq!(settled.removals_pending, 0, "{settled:?}");
        assert!(settled.writeback_done, "{settled:?}");
        // Nothing of the earlier test is left once settle returns.
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
        // With nothing pending, nothing is waited for and no note is due
        // for the removal part.
        let quiet = settle(base.path(), std::time::Duration::from_secs(60));
        assert_eq!(quiet.removals_pending, 0);
        let note = Settled {
            removal_wait_seconds: 2.0,
            removals_pending: 1,
            writeback_seconds: 0.0,
            writeback_done: true,
        }
        .note(base.path())
        .unwrap();
        assert!(
            note.contains("1 earlier test directories were still being removed after 2.0 s"),
            "{note}"
        );
    }

    #[test]
    fn files_are_created_inside_and_the_directory_removed_afterwards() {
        let base = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "t", false, Budget::unlimited()).unwrap();
        let dir = scratch.directory_of(&[b"a", b"b", b"f"]).unwrap();
        let mut f = Scratch::create_file(&dir, b"f").unwrap();
        std::io::Write::write_all(&mut f, b"hello").unwrap();
        assert_eq!(std::fs::read(base.path().join("t/a/b/f")).unwrap(), b"hello");
        // Twice the same name: refused, the first file untouched.
        assert!(Scratch::create_file(&dir, b"f").is_err());
        drop(scratch);
        assert!(!base.path().join("t").exists());
    }

    #[test]
    fn a_symlink_planted_on_the_way_is_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "t", false, Budget::unlimited()).unwrap();
        std::os::unix::fs::symlink(outside.path(), scratch.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), scratch.path().join("file")).unwrap();
        assert!(scratch.directory_of(&[b"link", b"x"]).is_err());
        let dir = scratch.directory_of(&[b"file"]).unwrap();
        assert!(Scratch::create_file(&dir, b"file").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    fn limited(files: u64, payload_bytes: u64, disk_bytes: u64) -> Budget {
        Budget {
            files,
            payload_bytes,
            disk_bytes,
            operator_limit: true,
        }
    }

    #[test]
    fn files_are_charged_against_the_declared_count_and_payload_and_refunded_when_refused() {
        let base = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "t", false, limited(2, 100, u64::MAX)).unwrap();
        assert!(scratch.charge_file(b"a", 60).is_ok());
        let err = scratch.charge_file(b"b", 60).unwrap_err();
        assert!(
            err.contains("100 B declared") && err.contains("declared size is a limit"),
            "{err}"
        );
        // The refused file took nothing: the rest of the payload and the second file are still there.
        assert!(scratch.charge_file(b"c", 40).is_ok());
        let err = scratch.charge_file(b"d", 0).unwrap_err();
        assert!(
            err.contains("declared 2 file(s)") && err.contains("declared count is a limit"),
            "{err}"
        );
    }

    #[test]
    fn every_entry_and_every_new_directory_is_charged_on_disk_once() {
        let base = tempfile::tempdir().unwrap();
        // Room for one directory and two files of one-byte names, not for a second directory.
        let room = (DIRECTORY_BYTES + ENTRY_BYTES + 1) + 2 * (ENTRY_BYTES + 1);
        let scratch = Scratch::create(base.path(), "t", false, limited(10, 0, room)).unwrap();
        scratch.directory_of(&[b"a", b"f"]).unwrap();
        // The same directory again costs nothing.
        scratch.directory_of(&[b"a", b"g"]).unwrap();
        assert!(scratch.charge_file(b"f", 0).is_ok() && scratch.charge_file(b"g", 0).is_ok());
        match scratch.directory_of(&[b"b", b"f"]) {
            Err(EntryError::Limit(why)) => {
                assert!(why.contains("--max-files-bytes") && why.contains("4 KiB"), "{why}")
            }
            other => panic!("expected the disk limit, got {other:?}"),
        }
        assert!(!scratch.path().join("b").exists(), "nothing made past the limit");
        let err = scratch.charge_file(b"h", 0).unwrap_err();
        assert!(err.contains("on disk"), "{err}");
    }

    #[test]
    fn a_declared_set_may_take_its_payload_and_its_entries_or_the_operators_limit() {
        let open = Budget::of_set(1, 0, None);
        assert!(!open.operator_limit);
        assert!(open.disk_bytes >= ENTRY_BYTES + super::super::wire::MAX_DEPTH as u64 * DIRECTORY_BYTES);
        let capped = Budget::of_set(300, 0, Some(10 << 20));
        assert_eq!((capped.disk_bytes, capped.operator_limit), (10 << 20, true));
        assert_eq!(Budget::of_set(u64::MAX, u64::MAX, None).disk_bytes, u64::MAX);
        assert_eq!(Budget::least_disk_bytes(3, 1000), 1000 + 3 * ENTRY_BYTES);
    }

    #[test]
    fn a_set_takes_at_most_half_the_free_inodes_and_bytes_and_a_million_files() {
        let free = Free {
            bytes: 10 << 30,
            inodes: 1000,
        };
        let dir = Path::new("/scratch");
        assert!(check_room(500, 1 << 20, free, dir).is_ok());
        let e = check_room(501, 1 << 20, free, dir).unwrap_err();
        assert!(e.contains("501 files") && e.contains("1000 free inodes"), "{e}");
        let e = check_room(10, (5 << 30) + 1, free, dir).unwrap_err();
        assert!(e.contains("at most half of it"), "{e}");
        let e = check_room(
            10_000_000,
            0,
            Free {
                bytes: u64::MAX,
                inodes: 0,
            },
            dir,
        )
        .unwrap_err();
        assert!(e.contains("at most 1000000 per test"), "{e}");
        assert!(
            check_room(
                10,
                0,
                Free {
                    bytes: 1 << 20,
                    inodes: 0
                },
                dir
            )
            .is_ok(),
            "no inode count: bytes only"
        );
    }

    #[test]
    fn a_directory_removed_in_the_background_is_gone_from_its_name_at_once() {
        let base = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "t", false, Budget::unlimited())
            .unwrap()
            .removed_in_background(true);
        let dir = scratch.directory_of(&[b"a", b"b"]).unwrap();
        drop(Scratch::create_file(&dir, b"f").unwrap());
        let path = scratch.path().to_path_buf();
        drop(scratch);
        assert!(!path.exists(), "renamed before the drop returned");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::fs::read_dir(base.path()).unwrap().next().is_some() {
            assert!(std::time::Instant::now() < deadline, "removed by its thread");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
