//! iperf3's RSA authentication, both ways, against the real iperf3 (Debian's
//! 3.12 is built with OpenSSL): nicbench's client with
//! --iperf3-username/--iperf3-rsa-public-key and IPERF3_PASSWORD against
//! `iperf3 -s`, and `iperf3 -c --username` against an agent whose iperf3
//! port requires it; keys made with openssl in the test's temporary
//! directory.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{nicbench, stderr};
use crate::iperf3::{agent_with, cookie_n, free_port, n, raw, reply, send_frame, wait_for_new_listener, Iperf3, Reply};

/// Runs nicbench with IPERF3_PASSWORD set to `password` (or unset).
fn nicbench_with_password(args: &[&str], password: Option<&str>) -> Output {
    let mut command = Command::new(crate::common::BIN);
    crate::common::clean_env(&mut command);
    command.env_remove("IPERF3_PASSWORD");
    if let Some(p) = password {
        command.env("IPERF3_PASSWORD", p);
    }
    let child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nicbench");
    crate::common::wait_output(child, crate::common::COMMAND_LIMIT, &format!("nicbench {args:?}"))
}

/// The installed iperf3's (major, minor) version and whether it was built
/// with authentication (its --version lists "authentication").
fn iperf3_build() -> ((u32, u32), bool) {
    let out = Command::new("iperf3").arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = text
        .split_whitespace()
        .nth(1)
        .and_then(|v| {
            let mut parts = v.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse().ok());
            Some((parts.next()?, parts.next()?))
        })
        .unwrap_or_else(|| panic!("iperf3 --version: {text}"));
    (version, text.contains("authentication"))
}

/// Paths of an RSA key pair made with openssl and of an authorized-users
/// file that lets in mario (password rossi).
struct Keys {
    private: String,
    public: String,
    users: String,
}

fn keys(dir: &Path) -> Keys {
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (private, public, users) = (path("private.pem"), path("public.pem"), path("users.csv"));
    for args in [
        vec!["genrsa", "-out", private.as_str(), "2048"],
        vec!["rsa", "-in", private.as_str(), "-pubout", "-out", public.as_str()],
    ] {
        let out = Command::new("openssl")
            .args(&args)
            .output()
            .expect("openssl (apt-get install openssl)");
        assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
    }
    // iperf3's authorized-users file: USER,sha256("{USER}PASSWORD") in hex.
    use sha2::Digest;
    let hash: String = sha2::Sha256::digest(b"{mario}rossi")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(&users, format!("# username,sha256\nmario,{hash}\n")).unwrap();
    Keys { private, public, users }
}

/// Skips (or fails under CI) without an iperf3 built with authentication
/// and openssl; the iperf3 version otherwise.
fn require_auth_tools() -> Result<(u32, u32), String> {
    crate::iperf3::installed()?;
    let (version, has_auth) = iperf3_build();
    if !has_auth {
        return Err(
            "this iperf3 was built without OpenSSL (no 'authentication' in iperf3 --version): Debian's is built with it"
                .into(),
        );
    }
    crate::common::tool("openssl", &["version"], "apt-get install openssl")?;
    Ok(version)
}

/// iperf3's RSA authentication against the real iperf3 server: the right
/// credentials run the test; a wrong password, missing credentials, the
/// padding the server does not read, and a missing IPERF3_PASSWORD are
/// each a clear error with nicbench's exit code (4 refused, 2 options).
#[test]
fn nicbench_authenticates_to_an_iperf3_server_that_requires_it() {
    let version = require!(require_auth_tools());
    let dir = tempfile::tempdir().unwrap();
    let Keys { private, public, users } = keys(dir.path());

    let port = free_port();
    let server = Command::new("iperf3")
        .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
        .args(["--rsa-private-key-path", &private, "--authorized-users-path", &users])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start iperf3 -s");
    let _server = Iperf3(Some(server));
    // Each test the server takes, refused or not, ends with its listener
    // closed and a new one opened: the next client waits for the new one
    // (connecting earlier is reset under load, not refused by the server).
    let mut listener = wait_for_new_listener(port, None);
    let mut serves_next = || listener = wait_for_new_listener(port, Some(listener));
    // Servers before 3.17 read only PKCS#1 v1.5; later ones only OAEP by default.
    let old_server = version < (3, 17);
    let target = format!("iperf3://127.0.0.1:{port}");
    let mut with_key = vec![
        "tcp",
        target.as_str(),
        "-t",
        "1",
        "--iperf3-username",
        "mario",
        "--iperf3-rsa-public-key",
        public.as_str(),
    ];
    let mut wrong_padding = with_key.clone();
    if old_server {
        with_key.push("--iperf3-use-pkcs1-padding");
    } else {
        wrong_padding.push("--iperf3-use-pkcs1-padding");
    }

    let mut json = with_key.clone();
    json.push("--json");
    let out = nicbench_with_password(&json, Some("rossi"));
    assert!(out.status.success(), "the right credentials: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(n(&doc["sum"]["receiver"]["bytes"]) > 0, "{}", doc["sum"]);
    assert_eq!(doc["peer_protocol"]["protocol"], "iperf3");
    serves_next();

    let out = nicbench_with_password(&with_key, Some("verdi"));
    assert_eq!(out.status.code(), Some(4), "a wrong password: {}", stderr(&out));
    assert!(stderr(&out).contains("denied user 'mario'"), "{}", stderr(&out));
    assert!(stderr(&out).contains("IPERF3_PASSWORD"), "{}", stderr(&out));
    serves_next();

    let out = nicbench_with_password(&wrong_padding, Some("rossi"));
    assert_eq!(out.status.code(), Some(4), "the other padding: {}", stderr(&out));
    assert!(stderr(&out).contains("--iperf3-use-pkcs1-padding"), "{}", stderr(&out));
    serves_next();

    let out = nicbench_with_password(&["tcp", &target, "-t", "1"], None);
    assert_eq!(out.status.code(), Some(4), "no credentials: {}", stderr(&out));
    assert!(stderr(&out).contains("requires authentication"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--iperf3-username"), "{}", stderr(&out));
    serves_next();

    // Refused before it connects: the server's listener stays as it was.
    let out = nicbench_with_password(&with_key, None);
    assert_eq!(out.status.code(), Some(2), "no password: {}", stderr(&out));
    assert!(stderr(&out).contains("set IPERF3_PASSWORD"), "{}", stderr(&out));

    // And the right credentials still work after the refusals.
    let out = nicbench_with_password(&with_key, Some("rossi"));
    assert!(out.status.success(), "after the refusals: {}", stderr(&out));
}

/// A pre-shared key file for an agent, readable by its owner only.
fn psk_file(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("agent.key");
    std::fs::write(&path, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.to_str().unwrap().to_string()
}

/// `iperf3 -c` against the agent's iperf3 port, as `user` (password in
/// IPERF3_PASSWORD) or without credentials: its exit status and its
/// output (stdout alone with `json`, else stdout and stderr).
fn iperf3_as(port: u16, user: Option<(&str, &str)>, public: &str, json: bool) -> (bool, String) {
    let mut command = Command::new("timeout");
    command
        .args(["60", "iperf3", "-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .env_remove("IPERF3_PASSWORD")
        .stdin(Stdio::null());
    if json {
        command.arg("-J");
    }
    if let Some((name, password)) = user {
        command
            .args(["--username", name, "--rsa-public-key-path", public])
            .env("IPERF3_PASSWORD", password);
    }
    let out = command.output().expect("run iperf3 -c");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !json {
        text.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    (out.status.success(), text)
}

/// The parameters of a 1 s TCP test with `token` as the credentials, as
/// an iperf3 client of `version` sends them.
fn params_with(token: &str, version: &str) -> String {
    format!(r#"{{"tcp":true,"time":1,"parallel":1,"len":131072,"client_version":"{version}","authtoken":"{token}"}}"#)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `serve --psk-file K --iperf3-port P` with iperf3's authentication
/// files: the real iperf3 3.12 client (PKCS#1 v1.5) runs its test with
/// the right user and password; a wrong password, an unknown user, no
/// credentials and a token 60 s old are each refused as iperf3 refuses
/// ("test authorization failed", SERVER_ERROR 142), logged with the
/// peer and the reason, and counted; an OAEP token of a 3.17 client
/// passes (our own client's encryption, the real 3.12 cannot make one).
#[test]
fn a_keyed_agent_lets_in_only_authenticated_iperf3_clients() {
    require!(require_auth_tools());
    let dir = tempfile::tempdir().unwrap();
    let Keys { private, public, users } = keys(dir.path());
    let psk = psk_file(dir.path());
    let (mut agent, port) = agent_with(&[
        "--psk-file",
        &psk,
        "--iperf3-rsa-private-key",
        &private,
        "--iperf3-authorized-users",
        &users,
        "--handshake-timeout",
        "5s",
    ]);

    let (ok, text) = iperf3_as(port, Some(("mario", "rossi")), &public, true);
    assert!(ok, "the right credentials: {text}");
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("iperf3 -J: {e}: {text}"));
    assert!(n(&doc["end"]["sum_received"]["bytes"]) > 0, "{}", doc["end"]);
    agent.wait_for_log("iperf3 client authenticated as 'mario'");

    for (user, reason) in [
        (Some(("mario", "verdi")), "user 'mario': wrong password"),
        (Some(("peach", "rossi")), "unknown user 'peach'"),
        (None, "no credentials"),
    ] {
        let (ok, text) = iperf3_as(port, user, &public, false);
        assert!(!ok, "{user:?} must be refused: {text}");
        assert!(text.contains("test authorization failed"), "{user:?}: {text}");
        let logs = agent.wait_for_log(reason);
        assert!(
            logs.lines()
                .any(|l| l.contains(reason) && l.contains("127.0.0.1:") && l.contains("iperf3 client refused")),
            "{logs}"
        );
    }

    // A stale timestamp: the right credentials, encrypted 60 s ago.
    use nicbench::iperf3::auth::{Credentials, Padding};
    let credentials = |padding| Credentials::load("mario", Some("rossi".into()), Path::new(&public), padding).unwrap();
    let stale = credentials(Padding::Pkcs1v15).token(now() - 60).unwrap();
    let mut s = raw(port);
    s.write_all(&cookie_n(1)).unwrap();
    assert_eq!(reply(&mut s), Reply::State(9), "PARAM_EXCHANGE");
    send_frame(&mut s, params_with(&stale, "3.12").as_bytes());
    assert_eq!(reply(&mut s), Reply::ServerError(142), "a token 60 s old");
    agent.wait_for_log("its timestamp is 6");

    // OAEP, as iperf3 3.17 and later encrypt by default: the test goes on.
    let fresh = credentials(Padding::Oaep).token(now()).unwrap();
    let mut s = raw(port);
    s.write_all(&cookie_n(2)).unwrap();
    assert_eq!(reply(&mut s), Reply::State(9), "PARAM_EXCHANGE");
    send_frame(&mut s, params_with(&fresh, "3.17").as_bytes());
    assert_eq!(reply(&mut s), Reply::State(10), "CREATE_STREAMS for an OAEP token");
    drop(s);

    let (ok, text) = iperf3_as(port, Some(("mario", "rossi")), &public, false);
    assert!(ok, "the right credentials after the refusals: {text}");
    agent.signal(libc::SIGTERM);
    let status = agent.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}: {}", agent.logs());
    let logs = agent.wait_for_log("agent stopped:");
    assert!(logs.contains("4 failed authentication(s)"), "{logs}");
}

/// With --psk-file, --iperf3-port alone would open a door the key does not
/// cover: the agent refuses to start and says what to give. Files it
/// cannot use are refused at start-up too.
#[test]
fn a_keyed_agent_without_iperf3_authentication_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let psk = psk_file(dir.path());
    let serve = [
        "serve",
        "-p",
        "0",
        "-B",
        "127.0.0.1",
        "--iperf3-port",
        "0",
        "--psk-file",
        psk.as_str(),
    ];
    let out = nicbench(&serve);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    for words in [
        "--psk-file does not cover --iperf3-port",
        "--iperf3-rsa-private-key FILE",
        "--iperf3-authorized-users FILE",
    ] {
        assert!(stderr(&out).contains(words), "{words}: {}", stderr(&out));
    }

    let not_a_key = dir.path().join("not-a-key.pem");
    std::fs::write(
        &not_a_key,
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
    )
    .unwrap();
    let users = dir.path().join("users.csv");
    std::fs::write(&users, "mario,abc\n").unwrap();
    let mut with_files = serve.to_vec();
    with_files.extend([
        "--iperf3-rsa-private-key",
        not_a_key.to_str().unwrap(),
        "--iperf3-authorized-users",
        users.to_str().unwrap(),
    ]);
    let out = nicbench(&with_files);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds no RSA private key"), "{}", stderr(&out));

    // One file without the other: an option error.
    let mut one = serve.to_vec();
    one.extend(["--iperf3-authorized-users", users.to_str().unwrap()]);
    let out = nicbench(&one);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--iperf3-rsa-private-key"), "{}", stderr(&out));
}
