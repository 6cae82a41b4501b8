//! A throwaway PostgreSQL server for a test: `initdb` into a temporary
//! directory, `postgres` listening only on a unix socket in it (no TCP
//! port, so nothing to collide with), stopped and removed when dropped,
//! also when the test fails. As root, the server runs as `nobody` (initdb
//! refuses root). Shared by the library's tests (`store::testing`) and the
//! command-line tests (`tests/cli/postgres.rs`), which include this file;
//! each uses part of it.
//!
//! `initdb` takes seconds (3.2 s here under a build's load), a copy of its
//! 39 MB a tenth of that: the first cluster of a build keeps what initdb
//! made as a template (`target/<profile>/pg-templates/<version>-<key>`,
//! beside the test binary, keyed by the server programs and initdb's
//! arguments), and later clusters copy it. The template is written whole
//! under a temporary name and renamed into place, so tests in parallel
//! processes see none or all of it; where anything about it fails, the
//! cluster is made by initdb as before.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server and its directory.
pub struct Cluster {
    dir: tempfile::TempDir,
    server: Child,
    /// The directory of the server programs.
    bin: PathBuf,
    /// The server's settings beyond the defaults (`-c name=value`, `-p`).
    settings: Vec<String>,
    /// The TCP port on 127.0.0.1, when it listens there too.
    port: Option<u16>,
}

/// A certificate (chain) and its key, in PEM, for a server with TLS on.
pub struct ServerTls {
    pub cert_pem: String,
    pub key_pem: String,
}

/// initdb's arguments but the data directory: part of a template's key.
const INITDB_ARGS: [&str; 8] = ["-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8", "--locale=C"];

/// The user the server runs as under root (nobody), and the database
/// user the cluster is created with.
const NOBODY: u32 = 65534;
pub const USER: &str = "nicbench";

/// The directory holding PostgreSQL's server programs: Debian's
/// `/usr/lib/postgresql/N/bin` (15 first), else `initdb` on the PATH.
fn binaries() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("/usr/lib/postgresql/15/bin")];
    if let Ok(versions) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut others: Vec<PathBuf> = versions.flatten().map(|e| e.path().join("bin")).collect();
        others.sort();
        candidates.extend(others.into_iter().rev());
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates
        .into_iter()
        .find(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file())
}

/// True when every directory from `path` up lets others through.
fn others_may_traverse(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.ancestors()
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// Writes `text` to a new `file` only its owner may read (the server's
/// user under root): the server refuses a key others may read.
fn write_private(file: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .and_then(|mut f| f.write_all(text.as_bytes()).map(|_| f))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    out.flush().map_err(|e| e.to_string())?;
    if is_root() {
        std::os::unix::fs::chown(file, Some(NOBODY), Some(NOBODY))
            .map_err(|e| format!("chown {}: {e}", file.display()))?;
    }
    Ok(())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `program` as the server's user: nobody under root, else this user.
fn as_server_user(program: PathBuf) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(program);
    if is_root() {
        command.uid(NOBODY).gid(NOBODY);
    }
    command.env_remove("PGDATA").env("LC_ALL", "C");
    command
}

/// Starts `postgres` on the cluster in `dir`, its log appended to
/// `dir/server.log`.
fn spawn_server(bin: &Path, dir: &Path, settings: &[String]) -> Result<Child, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .map_err(|e| e.to_string())?;
    as_server_user(bin.join("postgres"))
        .arg("-D")
        .arg(dir.join("data"))
        .arg("-k")
        .arg(dir)
        .args([
            "-c",
            "listen_addresses=",
            "-c",
            "fsync=off",
            "-c",
            "full_page_writes=off",
        ])
        .args(["-c", "synchronous_commit=off", "-c", "max_connections=40"])
        .args(settings)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("{} cannot run: {e}", bin.join("postgres").display()))
}

/// Makes a new cluster in `data` with `initdb`, as the server's user.
fn initdb(bin: &Path, data: &Path) -> Result<(), String> {
    let init = as_server_user(bin.join("initdb"))
        .arg("-D")
        .arg(data)
        .args(INITDB_ARGS)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot run: {e}", bin.join("initdb").display()))?;
    if !init.status.success() {
        return Err(format!(
            "initdb failed: {}{}",
            String::from_utf8_lossy(&init.stdout),
            String::from_utf8_lossy(&init.stderr)
        ));
    }
    Ok(())
}

/// Where the template of a cluster of the server programs in `bin` is
/// kept: `pg-templates` in the directory of the profile the test binary
/// was built in (target/debug/deps/cli-HASH: target/debug), named by the
/// programs' version directory and a key of their path, size and time
/// and of initdb's arguments. None where the test binary is elsewhere.
fn template_of(bin: &Path) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    if deps.file_name()? != "deps" {
        return None;
    }
    let server = std::fs::metadata(bin.join("postgres")).ok()?;
    let modified = server.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    let mut key = std::collections::hash_map::DefaultHasher::new();
    (bin, server.len(), modified, INITDB_ARGS).hash(&mut key);
    let version = bin.parent()?.file_name()?.to_string_lossy().into_owned();
    Some(
        deps.parent()?
            .join("pg-templates")
            .join(format!("{version}-{:016x}", key.finish())),
    )
}

/// Copies the template into `data`, owned by the server's user; false
/// (and nothing left in `data`) when there is no template or the copy
/// fails.
fn copy_template(template: &Path, data: &Path) -> bool {
    if !template.is_dir() {
        return false;
    }
    let owner = is_root().then_some(NOBODY);
    match copy_tree(template, data, owner) {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "the PostgreSQL template {} did not copy ({e}): initdb instead",
                template.display()
            );
            let _ = std::fs::remove_dir_all(data);
            false
        }
    }
}

/// Keeps a copy of the new cluster in `data` (initdb's work, the server
/// not started yet) as `template`: copied under a temporary name beside
/// it, then renamed into place. Where another process kept one first, the
/// rename fails and the copy goes; any failure leaves no template, and
/// the next cluster runs initdb again.
fn keep_as_template(data: &Path, template: &Path) {
    let Some(parent) = template.parent() else { return };
    if std::fs::create_dir_all(parent).is_err() {
        return;
    }
    let Ok(partial) = tempfile::Builder::new().prefix(".partial-").tempdir_in(parent) else {
        return;
    };
    let copy = partial.path().join("data");
    if copy_tree(data, &copy, None).is_ok() {
        let _ = std::fs::rename(&copy, template);
    }
}

/// Copies the directory `from` to the new directory `to`: files with
/// their permissions, directories with theirs, each owned by `owner`
/// when given. Anything but files and directories is refused (initdb
/// makes none).
fn copy_tree(from: &Path, to: &Path, owner: Option<u32>) -> std::io::Result<()> {
    let chown = |path: &Path| match owner {
        Some(id) => std::os::unix::fs::chown(path, Some(id), Some(id)),
        None => Ok(()),
    };
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target, owner)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
            chown(&target)?;
        } else {
            return Err(std::io::Error::other(format!(
                "{} is neither a file nor a directory",
                entry.path().display()
            )));
        }
    }
    std::fs::set_permissions(to, std::fs::metadata(from)?.permissions())?;
    chown(to)
}

impl Cluster {
    /// A new, running server; Err says what is missing (the caller skips
    /// or, under CI, fails).
    pub fn start() -> Result<Cluster, String> {
        Cluster::start_with(false, None)
    }

    /// A new server that also listens on 127.0.0.1 ([`Cluster::tcp_url`]),
    /// with TLS on (`ssl = on`, the certificate and key in its directory)
    /// when `tls` is given, off otherwise. A unix socket never carries
    /// TLS, so a TLS test needs the TCP port.
    pub fn start_on_tcp(tls: Option<&ServerTls>) -> Result<Cluster, String> {
        // A port free a moment ago; taken meanwhile (rare), the server
        // does not start and the next try takes another.
        let mut last = String::new();
        for _ in 0..5 {
            match Cluster::start_with(true, tls) {
                Ok(cluster) => return Ok(cluster),
                Err(e) if e.contains("could not bind") || e.contains("could not create any TCP/IP sockets") => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    fn start_with(tcp: bool, tls: Option<&ServerTls>) -> Result<Cluster, String> {
        let bin = binaries().ok_or(
            "PostgreSQL's server programs (initdb, postgres) are not installed: \
             apt-get install postgresql (Debian 12 has version 15)",
        )?;
        let temp = std::env::temp_dir();
        let base = if others_may_traverse(&temp) {
            temp
        } else {
            PathBuf::from("/tmp")
        };
        let dir = tempfile::Builder::new()
            .prefix("nb-pg-")
            .tempdir_in(&base)
            .map_err(|e| format!("cannot create a directory in {}: {e}", base.display()))?;
        if is_root() {
            std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY))
                .map_err(|e| format!("chown {}: {e}", dir.path().display()))?;
        }
        let data = dir.path().join("data");
        let template = template_of(&bin);
        let copied = template
            .as_deref()
            .is_some_and(|template| copy_template(template, &data));
        if !copied {
            initdb(&bin, &data)?;
            if let Some(template) = &template {
                keep_as_template(&data, template);
            }
        }
        let mut settings = Vec::new();
        let mut port = None;
        if tcp {
            let free = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("no free port on 127.0.0.1: {e}"))?
                .port();
            port = Some(free);
            settings.extend([
                "-c".into(),
                "listen_addresses=127.0.0.1".into(),
                "-p".into(),
                free.to_string(),
            ]);
        }
        if let Some(tls) = tls {
            for (setting, name, pem) in [
                ("ssl_cert_file", "server.crt", &tls.cert_pem),
                ("ssl_key_file", "server.key", &tls.key_pem),
            ] {
                let file = dir.path().join(name);
                write_private(&file, pem)?;
                settings.extend(["-c".into(), format!("{setting}={}", file.display())]);
            }
            settings.extend(["-c".into(), "ssl=on".into()]);
        }
        let server = spawn_server(&bin, dir.path(), &settings)?;
        let mut cluster = Cluster {
            dir,
            server,
            bin,
            settings,
            port,
        };
        cluster.wait_ready()?;
        Ok(cluster)
    }

    /// Stops the server the way a crash does (SIGQUIT: no shutdown
    /// checkpoint, every connection cut), then starts it again on the same
    /// data, which it recovers from its log.
    pub fn crash_and_restart(&mut self) -> Result<(), String> {
        // SAFETY: kill(2) on the server this Cluster started and has not reaped.
        unsafe { libc::kill(self.server.id() as libc::pid_t, libc::SIGQUIT) };
        self.server.wait().map_err(|e| e.to_string())?;
        self.server = spawn_server(&self.bin, self.dir.path(), &self.settings)?;
        self.wait_ready()
    }

    /// Stops the server (fast shutdown: every connection cut) and waits
    /// until it has exited; [`Cluster::start_again`] brings it back.
    pub fn stop(&mut self) -> Result<(), String> {
        // SAFETY: kill(2) on the server this Cluster started and has not reaped.
        unsafe { libc::kill(self.server.id() as libc::pid_t, libc::SIGINT) };
        self.server.wait().map(drop).map_err(|e| e.to_string())
    }

    /// Starts the stopped server again on the same data.
    pub fn start_again(&mut self) -> Result<(), String> {
        self.server = spawn_server(&self.bin, self.dir.path(), &self.settings)?;
        self.wait_ready()
    }

    /// Waits (30 s at most) until the server accepts a connection.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // The socket's name carries the port: a server on TCP has its
            // socket under that port's number, not 5432's.
            let mut config = postgres::Config::new();
            config.host_path(self.dir.path()).user(USER).dbname("postgres");
            if let Some(port) = self.port {
                config.port(port);
            }
            let error = match config.connect(postgres::NoTls) {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if let Ok(Some(status)) = self.server.try_wait() {
                return Err(format!(
                    "postgres exited ({status}) before it was ready: {}",
                    self.log()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("postgres was not ready after 30 s ({error}): {}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The directory of the server's socket.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of database `dbname` (`postgres` exists in every cluster).
    pub fn url(&self, dbname: &str) -> String {
        format!("postgres://{USER}@/{dbname}?host={}", self.dir.path().display())
    }

    /// The URL of database `dbname` over TCP to `host` (a name or
    /// address; `hostaddr=127.0.0.1` says where it is), with the query
    /// parameters `query` (`sslmode=...`). Panics if the server has no
    /// TCP port ([`Cluster::start_on_tcp`]).
    pub fn tcp_url(&self, host: &str, dbname: &str, query: &str) -> String {
        let port = self.port.expect("a server started with start_on_tcp");
        format!("postgres://{USER}@{host}:{port}/{dbname}?hostaddr=127.0.0.1&{query}")
    }

    /// A client to database `dbname`, for a test to look inside.
    pub fn client(&self, dbname: &str) -> postgres::Client {
        postgres::Config::new()
            .host_path(self.dir.path())
            .user(USER)
            .dbname(dbname)
            .connect(postgres::NoTls)
            .expect("the test server accepts connections")
    }

    /// The server's process id.
    pub fn server_pid(&self) -> u32 {
        self.server.id()
    }
}

impl Drop for Cluster {
    /// Fast shutdown (SIGINT), then SIGKILL after 10 s; the directory goes
    /// with the TempDir.
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.server.try_wait() {
            return; // stopped already (and reaped: its pid may be another's now)
        }
        let pid = self.server.id() as libc::pid_t;
        // SAFETY: kill(2) on the server this Cluster started and has not reaped.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.server.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}
