//! The two loops of a `files` connection: the sender takes the next file
//! of the set, writes its header, its contents in chunks (read from disk
//! or generated, optionally zstd-compressed) and its checksum; the receiver
//! checks every path, creates the file in the scratch directory, writes and
//! verifies it. Both work on any `Read + Write`, so tests drive them in
//! memory. Every file costs a few clock reads (per file and per chunk, not
//! per byte): that is how the time is split between reading, compressing,
//! waiting on the network and writing.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use xxhash_rust::xxh3::Xxh3;

use super::result::FilesEnd;
use super::scratch::{EntryError, Scratch};
use super::set::{self, Entry, Source};
use super::wire::{self, ABORT, COMPRESSED, HEADER_LEN, KIND_END, KIND_FILE, KIND_SYMLINK, MAX_CHUNK};
use crate::units::Bytes;

/// The files one side sends.
#[derive(Debug)]
pub enum FileList {
    Generated { source: Source, count: u64 },
    Directory { root: PathBuf, entries: Vec<Entry> },
}

impl FileList {
    fn len(&self) -> u64 {
        match self {
            FileList::Generated { count, .. } => *count,
            FileList::Directory { entries, .. } => entries.len() as u64,
        }
    }
}

/// What every sending connection of a side shares.
#[derive(Debug)]
pub struct SendPlan {
    pub files: FileList,
    /// The next file to take, shared by the side's connections.
    pub next: AtomicU64,
    pub compress_level: Option<i32>,
    pub compressibility: f64,
    /// Raw bytes per chunk.
    pub chunk: usize,
}

/// How a connection's loop ended.
#[derive(Debug, Default)]
pub struct Ended {
    pub part: FilesEnd,
    pub error: Option<String>,
}

fn seconds_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// The sender's output buffer: frames are gathered and written in large
/// writes; chunk bodies are read or generated straight into it.
struct Out<'a, W: Write> {
    w: W,
    buf: Vec<u8>,
    used: usize,
    wire: u64,
    counter: &'a AtomicU64,
    send_seconds: f64,
}

impl<W: Write> Out<'_, W> {
    fn flush(&mut self) -> io::Result<()> {
        if self.used == 0 {
            return Ok(());
        }
        let t = Instant::now();
        self.w.write_all(&self.buf[..self.used])?;
        self.send_seconds += seconds_since(t);
        self.wire += self.used as u64;
        self.used = 0;
        self.counter.store(self.wire, Ordering::Relaxed);
        Ok(())
    }

    /// Room for `n` bytes at the end of the buffer (n fits the buffer).
    fn reserve(&mut self, n: usize) -> io::Result<&mut [u8]> {
        if self.used + n > self.buf.len() {
            self.flush()?;
        }
        Ok(&mut self.buf[self.used..self.used + n])
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.reserve(bytes.len())?.copy_from_slice(bytes);
        self.used += bytes.len();
        Ok(())
    }
}

/// Errors of a sender that the receiver caused by closing (it reports why).
fn peer_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
    )
}

/// Sends files of `plan` until none is left (or `stop`), then the end mark,
/// and checks the receiver's count and digest against its own.
pub fn send_files<S: Read + Write>(conn: S, plan: &SendPlan, counter: &AtomicU64, stop: &AtomicBool) -> Ended {
    let chunk = plan.chunk.clamp(1, MAX_CHUNK);
    let bound = zstd::zstd_safe::compress_bound(chunk);
    let mut out = Out {
        w: conn,
        buf: vec![0u8; 2 * (bound + 4) + 64 * 1024],
        used: 0,
        wire: 0,
        counter,
        send_seconds: 0.0,
    };
    let mut sender = Sender {
        plan,
        chunk,
        part: FilesEnd::default(),
        raw: vec![0u8; if plan.compress_level.is_some() { chunk } else { 0 }],
        compressor: None,
        digest: 0,
    };
    if let Some(level) = plan.compress_level {
        match zstd::bulk::Compressor::new(level) {
            Ok(c) => sender.compressor = Some(c),
            Err(e) => {
                return Ended {
                    part: sender.part,
                    error: Some(format!("zstd level {level}: {e}")),
                }
            }
        }
    }
    let result = sender.run(&mut out, stop);
    let mut part = sender.part;
    part.send_seconds = out.send_seconds;
    let error = match result {
        Ok(()) => None,
        Err(e) if e.kind() == io::ErrorKind::Other || e.kind() == io::ErrorKind::InvalidData => Some(e.to_string()),
        Err(e) if peer_closed(&e) || e.kind() == io::ErrorKind::UnexpectedEof => {
            // The receiver stopped reading: its own report says why.
            part.peer_closed = true;
            None
        }
        Err(e) => Some(format!("sending after {} files: {e}", part.files)),
    };
    Ended { part, error }
}

struct Sender<'a> {
    plan: &'a SendPlan,
    chunk: usize,
    part: FilesEnd,
    raw: Vec<u8>,
    compressor: Option<zstd::bulk::Compressor<'static>>,
    digest: u64,
}

impl Sender<'_> {
    fn run<S: Read + Write>(&mut self, out: &mut Out<S>, stop: &AtomicBool) -> io::Result<()> {
        let total = self.plan.files.len();
        loop {
            if stop.load(Ordering::Relaxed) {
                self.part.aborted = true;
                break;
            }
            let index = self.plan.next.fetch_add(1, Ordering::Relaxed);
            if index >= total {
                break;
            }
            if !self.file(out, index, stop)? {
                self.part.aborted = true;
                out.flush()?;
                return Ok(());
            }
        }
        out.put(&[KIND_END])?;
        out.flush()?;
        if self.part.aborted {
            return Ok(());
        }
        let mut answer = [0u8; wire::ANSWER_LEN];
        let t = Instant::now();
        out.w.read_exact(&mut answer)?;
        out.send_seconds += seconds_since(t);
        let files = u64::from_be_bytes(answer[..8].try_into().expect("8 bytes"));
        let digest = u64::from_be_bytes(answer[8..].try_into().expect("8 bytes"));
        self.part.digest = format!("{:016x}", self.digest);
        let verified = files == self.part.files && digest == self.digest;
        self.part.verified = Some(verified);
        if !verified {
            return Err(io::Error::other(format!(
                "the set did not arrive intact: the receiver counted {files} files (digest {digest:016x}), \
                 the sender sent {} (digest {:016x})",
                self.part.files, self.digest
            )));
        }
        Ok(())
    }

    /// Sends file `index`; false when told to stop in the middle of it.
    fn file<S: Read + Write>(&mut self, out: &mut Out<S>, index: u64, stop: &AtomicBool) -> io::Result<bool> {
        let (path, size, mut source) = match &self.plan.files {
            FileList::Generated { source, .. } => {
                let (path, size) = source.generated_file(index);
                (path, size, None)
            }
            FileList::Directory { root, entries } => {
                let entry = &entries[index as usize];
                let t = Instant::now();
                let full = root.join(std::ffi::OsStr::from_bytes_path(&entry.path));
                let file =
                    File::open(&full).map_err(|e| io::Error::other(format!("opening {}: {e}", full.display())))?;
                self.part.open_seconds += seconds_since(t);
                (entry.path.clone(), entry.size, Some((file, full)))
            }
        };
        let mut header = Vec::with_capacity(HEADER_LEN + path.len());
        wire::put_header(&mut header, &path, size);
        out.put(&header)?;
        let mut hasher = Xxh3::new();
        let mut sent = 0u64;
        while sent < size {
            if stop.load(Ordering::Relaxed) {
                out.put(&ABORT.to_be_bytes())?;
                return Ok(false);
            }
            let n = (size - sent).min(self.chunk as u64) as usize;
            if self.compressor.is_some() {
                let mut raw = std::mem::take(&mut self.raw);
                self.fill(&mut raw[..n], &mut source, index, sent)?;
                hasher.update(&raw[..n]);
                self.compressed_chunk(out, &raw[..n])?;
                self.raw = raw;
            } else {
                let slot = out.reserve(4 + n)?;
                slot[..4].copy_from_slice(&(n as u32).to_be_bytes());
                let body = &mut slot[4..];
                self.fill(body, &mut source, index, sent)?;
                let t = Instant::now();
                hasher.update(body);
                self.part.checksum_seconds += seconds_since(t);
                out.used += 4 + n;
            }
            sent += n as u64;
        }
        if let Some((file, _)) = source {
            let t = Instant::now();
            drop(file);
            self.part.open_seconds += seconds_since(t);
        }
        let checksum = hasher.digest128();
        out.put(&checksum.to_be_bytes())?;
        self.part.files += 1;
        self.part.payload_bytes += size;
        self.digest = self.digest.wrapping_add(wire::entry_digest(&path, checksum));
        Ok(true)
    }

    /// The next `buffer.len()` bytes of the file: read, or generated.
    fn fill(
        &mut self,
        buffer: &mut [u8],
        source: &mut Option<(File, PathBuf)>,
        index: u64,
        offset: u64,
    ) -> io::Result<()> {
        let t = Instant::now();
        match source {
            None => {
                set::generate(buffer, index, offset, self.plan.compressibility);
                self.part.generate_seconds += seconds_since(t);
            }
            Some((file, path)) => {
                file.read_exact(buffer).map_err(|e| {
                    io::Error::other(match e.kind() {
                        io::ErrorKind::UnexpectedEof => {
                            format!(
                                "{} shrank while it was being sent (a file must not change during the test)",
                                path.display()
                            )
                        }
                        _ => format!("reading {}: {e}", path.display()),
                    })
                })?;
                self.part.read_seconds += seconds_since(t);
            }
        }
        Ok(())
    }

    fn compressed_chunk<S: Read + Write>(&mut self, out: &mut Out<S>, raw: &[u8]) -> io::Result<()> {
        let compressor = self.compressor.as_mut().expect("compressing");
        let bound = zstd::zstd_safe::compress_bound(raw.len());
        let t = Instant::now();
        let slot = out.reserve(4 + bound)?;
        let packed = compressor
            .compress_to_buffer(raw, &mut slot[4..])
            .map_err(|e| io::Error::other(format!("zstd: {e}")))?;
        self.part.compress_seconds += seconds_since(t);
        if packed < raw.len() {
            slot[..4].copy_from_slice(&(packed as u32 | COMPRESSED).to_be_bytes());
            out.used += 4 + packed;
            Ok(())
        } else {
            // Incompressible: sent as it is.
            out.put(&(raw.len() as u32).to_be_bytes())?;
            out.put(raw)
        }
    }
}

/// Bytes of a path as an OS string (paths are bytes on Linux).
trait FromBytesPath {
    fn from_bytes_path(bytes: &[u8]) -> &std::ffi::OsStr;
}

impl FromBytesPath for std::ffi::OsStr {
    fn from_bytes_path(bytes: &[u8]) -> &std::ffi::OsStr {
        std::os::unix::ffi::OsStrExt::from_bytes(bytes)
    }
}

/// The receiver's input buffer.
struct In<'a, R: Read> {
    r: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    wire: u64,
    counter: &'a AtomicU64,
    receive_seconds: f64,
}

impl<R: Read> In<'_, R> {
    /// Reads more; Err(UnexpectedEof) when the sender closed.
    fn fill(&mut self) -> io::Result<()> {
        if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let t = Instant::now();
        let n = loop {
            match self.r.read(&mut self.buf[self.end..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        self.receive_seconds += seconds_since(t);
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the sender closed the connection",
            ));
        }
        self.end += n;
        self.wire += n as u64;
        self.counter.store(self.wire, Ordering::Relaxed);
        Ok(())
    }

    /// Exactly `n` bytes (n fits the buffer).
    fn need(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.start + n > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < n {
            self.fill()?;
        }
        self.start += n;
        Ok(&self.buf[self.start - n..self.start])
    }

    /// Up to `n` bytes, at least one.
    fn some(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.fill()?;
        }
        let take = n.min(self.end - self.start);
        self.start += take;
        Ok(&self.buf[self.start - take..self.start])
    }
}

/// The file being written, removed when the transfer fails or stops.
struct Partial {
    dir: OwnedFd,
    name: Vec<u8>,
}

/// What the receiving connections of a side share.
pub struct ReceivePlan {
    pub scratch: Arc<Scratch>,
    pub fsync: bool,
}

/// Receives files until the sender's end mark, answers with its count and
/// digest. Any refusal or failure ends the connection with an error that
/// says what happened; the file in progress is removed.
pub fn receive_files<S: Read + Write>(conn: S, plan: &ReceivePlan, counter: &AtomicU64) -> Ended {
    let mut input = In {
        r: conn,
        buf: vec![0u8; 2 * (zstd::zstd_safe::compress_bound(MAX_CHUNK) + 4) + 64 * 1024],
        start: 0,
        end: 0,
        wire: 0,
        counter,
        receive_seconds: 0.0,
    };
    let mut receiver = Receiver {
        plan,
        part: FilesEnd::default(),
        raw: Vec::new(),
        decompressor: None,
        digest: 0,
        partial: None,
        last_dir: None,
    };
    let result = receiver.run(&mut input);
    if let Some(partial) = receiver.partial.take() {
        if Scratch::remove_file(&partial.dir, &partial.name).is_ok() {
            receiver.part.partial_files_removed += 1;
        }
    }
    let mut part = receiver.part;
    part.receive_seconds = input.receive_seconds;
    part.digest = format!("{:016x}", receiver.digest);
    let error = match result {
        Ok(()) => None,
        // The sender was told to stop: not a failure of this end.
        Err(_) if part.aborted => None,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Some(format!(
            "the sender closed the connection after {} files without ending the set (see the sender's error)",
            part.files
        )),
        Err(e) => Some(e.to_string()),
    };
    Ended { part, error }
}

struct Receiver<'a> {
    plan: &'a ReceivePlan,
    part: FilesEnd,
    raw: Vec<u8>,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
    digest: u64,
    partial: Option<Partial>,
    /// The directory of the last file and its path, reused by the next
    /// file in the same directory.
    last_dir: Option<(Vec<u8>, OwnedFd)>,
}

fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl Receiver<'_> {
    fn run<S: Read + Write>(&mut self, input: &mut In<S>) -> io::Result<()> {
        loop {
            match input.need(1)?[0] {
                KIND_END => break,
                KIND_FILE => self.file(input)?,
                KIND_SYMLINK => return Err(refused("refused a symbolic link: links are never created".into())),
                kind => {
                    return Err(refused(format!(
                        "unknown entry kind {kind}: not a nicbench files sender"
                    )))
                }
            }
        }
        let mut answer = [0u8; wire::ANSWER_LEN];
        answer[..8].copy_from_slice(&self.part.files.to_be_bytes());
        answer[8..].copy_from_slice(&self.digest.to_be_bytes());
        input.r.write_all(&answer)?;
        input.r.flush()
    }

    fn file<S: Read + Write>(&mut self, input: &mut In<S>) -> io::Result<()> {
        let mut fixed = [0u8; HEADER_LEN];
        fixed[0] = KIND_FILE;
        fixed[1..].copy_from_slice(input.need(HEADER_LEN - 1)?);
        let header = wire::parse_header(&fixed).map_err(refused)?;
        let path = input.need(header.path_len)?.to_vec();
        let components = wire::check_path(&path).map_err(refused)?;
        let name = components.last().expect("a checked path has a name").to_vec();
        self.plan.scratch.charge_file(&name, header.size).map_err(|why| {
            refused(format!(
                "refused file '{}' of {}: {why}",
                wire::shown(&path),
                Bytes(header.size)
            ))
        })?;
        let t = Instant::now();
        let dir_path = &path[..path.len() - name.len()];
        let dir = match self.last_dir.take() {
            Some((p, fd)) if p == dir_path => fd,
            _ => self.plan.scratch.directory_of(&components).map_err(|e| match e {
                EntryError::Limit(why) => refused(format!("refused the directory of '{}': {why}", wire::shown(&path))),
                EntryError::Io(e) => refused(format!(
                    "cannot create the directory of '{}' in the scratch directory: {e}{}",
                    wire::shown(&path),
                    if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
                        " (a symbolic link or a file is in the way; links are never followed)"
                    } else {
                        ""
                    }
                )),
            })?,
        };
        let mut file = Scratch::create_file(&dir, &name).map_err(|e| {
            refused(match e.kind() {
                io::ErrorKind::AlreadyExists => {
                    format!(
                        "refused file '{}': it exists already (sent twice, or a link is in the way)",
                        wire::shown(&path)
                    )
                }
                _ => self.disk_error(&path, e),
            })
        })?;
        self.partial = Some(Partial {
            dir: dir.try_clone()?,
            name,
        });
        self.part.create_seconds += seconds_since(t);
        let checksum = self.contents(input, &mut file, &path, header.size)?;
        let Some(checksum) = checksum else {
            // The sender stopped in the middle of this file.
            self.part.aborted = true;
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
        };
        if self.plan.fsync {
            let t = Instant::now();
            file.sync_all().map_err(|e| refused(self.disk_error(&path, e)))?;
            self.part.fsync_seconds += seconds_since(t);
        }
        let t = Instant::now();
        drop(file);
        self.partial = None;
        self.last_dir = Some((dir_path.to_vec(), dir));
        self.part.create_seconds += seconds_since(t);
        self.part.files += 1;
        self.part.payload_bytes += header.size;
        self.digest = self.digest.wrapping_add(wire::entry_digest(&path, checksum));
        Ok(())
    }

    fn disk_error(&self, path: &[u8], e: io::Error) -> String {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => format!(
                "the scratch directory {} is full ({e}) after {} files ({}): the test stopped and the partial \
                 file was removed; free space there, start the agent with --scratch on a larger filesystem, \
                 or send a smaller set",
                self.plan.scratch.path().display(),
                self.part.files,
                Bytes(self.part.payload_bytes)
            ),
            _ => format!(
                "writing '{}' in {}: {e}",
                wire::shown(path),
                self.plan.scratch.path().display()
            ),
        }
    }

    /// Reads the chunks and trailer of a file of `size` bytes into `file`;
    /// None when the sender aborted it.
    fn contents<S: Read + Write>(
        &mut self,
        input: &mut In<S>,
        file: &mut File,
        path: &[u8],
        size: u64,
    ) -> io::Result<Option<u128>> {
        let mut hasher = Xxh3::new();
        let mut got = 0u64;
        while got < size {
            let len = u32::from_be_bytes(input.need(4)?.try_into().expect("4 bytes"));
            if len == ABORT {
                return Ok(None);
            }
            let left = size - got;
            if len & COMPRESSED != 0 {
                let packed_len = (len & !COMPRESSED) as usize;
                if packed_len > zstd::zstd_safe::compress_bound(MAX_CHUNK) {
                    return Err(refused(format!(
                        "a compressed chunk of {packed_len} bytes is too large"
                    )));
                }
                if self.decompressor.is_none() {
                    self.decompressor = Some(zstd::bulk::Decompressor::new()?);
                    self.raw = vec![0u8; MAX_CHUNK];
                }
                let packed = input.need(packed_len)?;
                let t = Instant::now();
                let room = (left.min(MAX_CHUNK as u64)) as usize;
                let n = self
                    .decompressor
                    .as_mut()
                    .expect("created above")
                    .decompress_to_buffer(packed, &mut self.raw[..room])
                    .map_err(|e| {
                        refused(format!(
                            "a compressed chunk of '{}' is corrupt or too large: {e}",
                            wire::shown(path)
                        ))
                    })?;
                self.part.decompress_seconds += seconds_since(t);
                if n == 0 {
                    return Err(refused("an empty compressed chunk".into()));
                }
                let t = Instant::now();
                hasher.update(&self.raw[..n]);
                self.part.checksum_seconds += seconds_since(t);
                let t = Instant::now();
                file.write_all(&self.raw[..n])
                    .map_err(|e| refused(self.disk_error(path, e)))?;
                self.part.write_seconds += seconds_since(t);
                got += n as u64;
            } else {
                let len = len as u64;
                if len == 0 || len > left || len > MAX_CHUNK as u64 {
                    return Err(refused(format!(
                        "a chunk of {len} bytes where '{}' has {left} left (chunks are 1 B to 1 MiB)",
                        wire::shown(path)
                    )));
                }
                let mut remaining = len as usize;
                while remaining > 0 {
                    let piece = input.some(remaining)?;
                    remaining -= piece.len();
                    let t = Instant::now();
                    hasher.update(piece);
                    self.part.checksum_seconds += seconds_since(t);
                    let t = Instant::now();
                    file.write_all(piece).map_err(|e| refused(self.disk_error(path, e)))?;
                    self.part.write_seconds += seconds_since(t);
                }
                got += len;
            }
        }
        let sent = u128::from_be_bytes(input.need(16)?.try_into().expect("16 bytes"));
        let checksum = hasher.digest128();
        if sent != checksum {
            return Err(refused(format!(
                "checksum mismatch on '{}': the sender's xxh3 is {sent:032x}, the received contents' {checksum:032x}",
                wire::shown(path)
            )));
        }
        Ok(Some(checksum))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::files::scratch::{Budget, DIRECTORY_BYTES};
    use std::os::unix::net::UnixStream;

    fn scratch(base: &std::path::Path, budget: Budget) -> Arc<ReceivePlan> {
        Arc::new(ReceivePlan {
            scratch: Arc::new(Scratch::create(base, "t", true, budget).unwrap()),
            fsync: false,
        })
    }

    /// Runs the receiver on `bytes` from a fake sender and returns how it ended.
    fn receive(bytes: Vec<u8>, plan: &ReceivePlan) -> Ended {
        let (mut a, b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = a.write_all(&bytes);
            let _ = a.shutdown(std::net::Shutdown::Write);
            a
        });
        let counter = AtomicU64::new(0);
        let ended = receive_files(&b, plan, &counter);
        drop(b);
        drop(writer.join().unwrap());
        ended
    }

    fn file_frame(path: &[u8], contents: &[u8], checksum: u128) -> Vec<u8> {
        let mut out = Vec::new();
        wire::put_header(&mut out, path, contents.len() as u64);
        if !contents.is_empty() {
            out.extend_from_slice(&(contents.len() as u32).to_be_bytes());
            out.extend_from_slice(contents);
        }
        out.extend_from_slice(&checksum.to_be_bytes());
        out
    }

    fn good(path: &[u8], contents: &[u8]) -> Vec<u8> {
        file_frame(path, contents, xxhash_rust::xxh3::xxh3_128(contents))
    }

    #[test]
    fn a_generated_compressed_set_arrives_intact_and_both_ends_verify() {
        let base = tempfile::tempdir().unwrap();
        let receive_plan = scratch(base.path(), Budget::unlimited());
        let plan = SendPlan {
            files: FileList::Generated {
                source: Source::Generated {
                    count: 5,
                    file_bytes: 300_000,
                },
                count: 5,
            },
            next: AtomicU64::new(0),
            compress_level: Some(1),
            compressibility: 0.5,
            chunk: 64 * 1024,
        };
        let (a, b) = UnixStream::pair().unwrap();
        let receiver = {
            let plan = Arc::clone(&receive_plan);
            std::thread::spawn(move || receive_files(&b, &plan, &AtomicU64::new(0)))
        };
        let sent = send_files(&a, &plan, &AtomicU64::new(0), &AtomicBool::new(false));
        let got = receiver.join().unwrap();
        assert_eq!(sent.error, None);
        assert_eq!(got.error, None);
        assert_eq!(sent.part.verified, Some(true));
        assert_eq!((got.part.files, got.part.payload_bytes), (5, 1_500_000));
        assert_eq!(sent.part.digest, got.part.digest);
        assert!(sent.part.compress_seconds > 0.0 && got.part.decompress_seconds > 0.0);
        let mut expected = vec![0u8; 300_000];
        let mut at = 0;
        while at < expected.len() {
            let n = (expected.len() - at).min(64 * 1024);
            set::generate(&mut expected[at..at + n], 3, at as u64, 0.5);
            at += n;
        }
        let written = std::fs::read(receive_plan.scratch.path().join("d00000/f00000003")).unwrap();
        assert!(written == expected, "file 3 differs from what was generated");
    }

    #[test]
    fn hostile_paths_are_refused_and_nothing_is_written_outside() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let escape = format!("../{}", "x");
        let absolute = outside.path().join("abs");
        for (path, needle) in [
            (escape.as_bytes().to_vec(), "'..'"),
            (absolute.as_os_str().as_encoded_bytes().to_vec(), "absolute"),
            (b"a/../../x".to_vec(), "'..'"),
        ] {
            let plan = scratch(base.path(), Budget::unlimited());
            let ended = receive(good(&path, b"evil"), &plan);
            let error = ended.error.expect("refused");
            assert!(error.contains(needle), "{error}");
            assert_eq!(ended.part.files, 0);
            drop(plan);
            std::fs::remove_dir_all(base.path().join("t")).unwrap();
        }
        // A symbolic link planted in the scratch directory, and a link entry.
        let plan = scratch(base.path(), Budget::unlimited());
        std::os::unix::fs::symlink(outside.path(), plan.scratch.path().join("link")).unwrap();
        let ended = receive(good(b"link/x", b"evil"), &plan);
        assert!(ended.error.unwrap().contains("symbolic link"));
        let ended = receive(vec![wire::KIND_SYMLINK, 0, 0], &plan);
        assert!(ended.error.unwrap().contains("symbolic link"));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "written outside");
        let names: Vec<_> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["t"], "only the scratch directory exists beside it");
    }

    #[test]
    fn a_bad_checksum_or_a_set_over_budget_is_refused_and_the_partial_file_removed() {
        let base = tempfile::tempdir().unwrap();
        let plan = scratch(base.path(), Budget::unlimited());
        let mut bytes = good(b"ok", b"fine");
        bytes.extend(file_frame(b"bad", b"contents", 42));
        let ended = receive(bytes, &plan);
        assert!(ended.error.unwrap().contains("checksum mismatch on 'bad'"));
        assert_eq!(ended.part.files, 1);
        assert_eq!(ended.part.partial_files_removed, 1);
        assert!(plan.scratch.path().join("ok").exists() && !plan.scratch.path().join("bad").exists());

        let small = tempfile::tempdir().unwrap();
        let plan = scratch(small.path(), Budget::of_set(1, 10, None));
        let ended = receive(good(b"big", &[7u8; 100]), &plan);
        assert!(ended.error.unwrap().contains("exceed"));
        assert!(!plan.scratch.path().join("big").exists());

        // The same name twice: the second is refused, the first kept.
        let again = tempfile::tempdir().unwrap();
        let plan = scratch(again.path(), Budget::unlimited());
        let mut bytes = good(b"a/f", b"1");
        bytes.extend(good(b"a/f", b"2"));
        assert!(receive(bytes, &plan).error.unwrap().contains("exists already"));
        assert_eq!(std::fs::read(plan.scratch.path().join("a/f")).unwrap(), b"1");
    }

    #[test]
    fn a_sender_told_to_stop_mid_file_leaves_no_partial_file_and_no_error() {
        let base = tempfile::tempdir().unwrap();
        let plan = scratch(base.path(), Budget::unlimited());
        let mut bytes = Vec::new();
        wire::put_header(&mut bytes, b"half", 100);
        bytes.extend_from_slice(&10u32.to_be_bytes());
        bytes.extend_from_slice(&[1u8; 10]);
        bytes.extend_from_slice(&ABORT.to_be_bytes());
        let ended = receive(bytes, &plan);
        assert_eq!(ended.error, None);
        assert!(ended.part.aborted);
        assert_eq!(ended.part.partial_files_removed, 1);
        assert!(!plan.scratch.path().join("half").exists());
    }

    #[test]
    fn more_files_than_declared_are_refused_naming_the_count() {
        let base = tempfile::tempdir().unwrap();
        let plan = scratch(base.path(), Budget::of_set(1, 0, None));
        let mut bytes = Vec::new();
        for i in 0..50 {
            bytes.extend(good(format!("f{i}").as_bytes(), b""));
        }
        let ended = receive(bytes, &plan);
        let error = ended.error.expect("refused");
        assert!(
            error.contains("refused file 'f1'") && error.contains("declared 1 file(s)"),
            "{error}"
        );
        assert_eq!(ended.part.files, 1);
        assert_eq!(std::fs::read_dir(plan.scratch.path()).unwrap().count(), 1);
    }

    #[test]
    fn deep_trees_of_long_names_are_charged_per_directory_and_stopped_at_the_disk_limit() {
        let base = tempfile::tempdir().unwrap();
        // Room for about 40 directories.
        let plan = scratch(base.path(), Budget::of_set(300, 0, Some(40 * DIRECTORY_BYTES)));
        let mut bytes = Vec::new();
        for i in 0..300 {
            let dirs: Vec<String> = (0..15).map(|d| format!("{i:03}{d:02}{}", "n".repeat(200))).collect();
            bytes.extend(good(format!("{}/f", dirs.join("/")).as_bytes(), b""));
        }
        let ended = receive(bytes, &plan);
        let error = ended.error.expect("refused");
        assert!(
            error.contains("--max-files-bytes") && error.contains("4 KiB"),
            "{error}"
        );
        assert!(ended.part.files < 3, "{} files", ended.part.files);
        // A path one level deeper than the limit is refused before anything is made.
        let plan = scratch(base.path().join("deep").as_path(), Budget::unlimited());
        let deep = format!("{}/f", vec!["d"; wire::MAX_DEPTH + 1].join("/"));
        let error = receive(good(deep.as_bytes(), b""), &plan).error.expect("refused");
        assert!(error.contains("depth limit of 16"), "{error}");
        assert_eq!(std::fs::read_dir(plan.scratch.path()).unwrap().count(), 0);
    }
}
