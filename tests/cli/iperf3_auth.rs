//! iperf3's RSA authentication against the real iperf3 server (Debian's
//! 3.12 is built with OpenSSL): nicbench's client with
//! --iperf3-username/--iperf3-rsa-public-key and IPERF3_PASSWORD, keys made
//! with openssl in the test's temporary directory.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::stderr;
use crate::iperf3::{free_port, listening, n, Iperf3};

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

/// iperf3's RSA authentication against the real iperf3 server: the right
/// credentials run the test; a wrong password, missing credentials, the
/// padding the server does not read, and a missing IPERF3_PASSWORD are
/// each a clear error with nicbench's exit code (4 refused, 2 options).
#[test]
fn nicbench_authenticates_to_an_iperf3_server_that_requires_it() {
    require!(crate::iperf3::installed());
    let (version, has_auth) = iperf3_build();
    require!(if has_auth {
        Ok(())
    } else {
        Err("this iperf3 was built without OpenSSL (no 'authentication' in iperf3 --version): Debian's is built with it")
    });
    require!(crate::common::tool("openssl", &["version"], "apt-get install openssl"));
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
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

    let port = free_port();
    let server = Command::new("iperf3")
        .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
        .args(["--rsa-private-key-path", &private, "--authorized-users-path", &users])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start iperf3 -s");
    let _server = Iperf3(Some(server));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !listening(port) {
        assert!(
            std::time::Instant::now() < deadline,
            "iperf3 -s did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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

    let out = nicbench_with_password(&with_key, Some("verdi"));
    assert_eq!(out.status.code(), Some(4), "a wrong password: {}", stderr(&out));
    assert!(stderr(&out).contains("denied user 'mario'"), "{}", stderr(&out));
    assert!(stderr(&out).contains("IPERF3_PASSWORD"), "{}", stderr(&out));

    let out = nicbench_with_password(&wrong_padding, Some("rossi"));
    assert_eq!(out.status.code(), Some(4), "the other padding: {}", stderr(&out));
    assert!(stderr(&out).contains("--iperf3-use-pkcs1-padding"), "{}", stderr(&out));

    let out = nicbench_with_password(&["tcp", &target, "-t", "1"], None);
    assert_eq!(out.status.code(), Some(4), "no credentials: {}", stderr(&out));
    assert!(stderr(&out).contains("requires authentication"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--iperf3-username"), "{}", stderr(&out));

    let out = nicbench_with_password(&with_key, None);
    assert_eq!(out.status.code(), Some(2), "no password: {}", stderr(&out));
    assert!(stderr(&out).contains("set IPERF3_PASSWORD"), "{}", stderr(&out));

    // And the right credentials still work after the refusals.
    let out = nicbench_with_password(&with_key, Some("rossi"));
    assert!(out.status.success(), "after the refusals: {}", stderr(&out));
}
