//! TLS as a transport of the `tcp` workload (`--transport tls`): each
//! cipher suite offered is the one negotiated and both ends count the same
//! plaintext bytes; the client trusts the agent's certificate by its
//! announced fingerprint, by `--tls-pin` or by `--tls-ca`, and refuses a
//! certificate that is not the one it was told before any data flows; the
//! agent keeps serving after; rr runs over TLS, `--crr` with a handshake
//! per transaction counted on both ends; what cannot run over TLS says so.

use serde_json::Value;

use super::common::*;

/// The fingerprint an agent printed at start (`TLS certificate (...): sha256:ab:cd:...`).
fn printed_fingerprint(agent: &AgentProcess) -> String {
    let logs = agent.wait_for_log("TLS certificate (");
    let line = logs
        .lines()
        .find(|l| l.contains("TLS certificate ("))
        .expect("the certificate line");
    line.split("sha256:").nth(1).unwrap().trim().replace(':', "")
}

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn each_cipher_is_negotiated_and_both_ends_count_every_byte() {
    let agent = AgentProcess::start(&[]);
    let fingerprint = printed_fingerprint(&agent);
    assert_eq!(fingerprint.len(), 64, "{fingerprint}");
    for (cipher, suite) in [
        ("aes128-gcm", "TLS13_AES_128_GCM_SHA256"),
        ("aes256-gcm", "TLS13_AES_256_GCM_SHA384"),
        ("chacha20-poly1305", "TLS13_CHACHA20_POLY1305_SHA256"),
    ] {
        // A byte count, both directions, two streams each way: every
        // stream's receiver has exactly what its sender sealed.
        let run = agent.run_json(
            "tcp",
            &[
                "--transport",
                "tls",
                "--cipher",
                cipher,
                "-n",
                "6M",
                "-P",
                "2",
                "--bidir",
                "-l",
                "100K",
            ],
        );
        assert_eq!(run["spec"]["params"]["transport"], "tls", "{}", run["spec"]);
        assert_eq!(run["spec"]["params"]["tls"]["cipher"], cipher, "{}", run["spec"]);
        super::result_schema::assert_valid(&super::result_schema::schema(), &run, "tcp --transport tls");
        let streams = run["streams"].as_array().unwrap();
        assert_eq!(streams.len(), 4, "{cipher}");
        let mut per_direction = std::collections::BTreeMap::new();
        for s in streams {
            let (sender, receiver) = (&s["sender"], &s["receiver"]);
            let sent = count(&sender["bytes"]) + count(&sender["omitted_bytes"]);
            let received = count(&receiver["bytes"]) + count(&receiver["omitted_bytes"]);
            assert_eq!(sent, received, "{cipher}: stream {}", s["stream_id"]);
            *per_direction
                .entry(s["flow"].as_str().unwrap().to_string())
                .or_insert(0) += sent;
            for end in [sender, receiver] {
                let tls = &end["tls"];
                assert_eq!(tls["cipher_suite"], suite, "{cipher}: {tls}");
                assert_eq!(tls["version"], "TLSv1_3", "{tls}");
                assert_eq!(tls["record_layer"], "rustls", "{tls}");
                assert_eq!(tls["certificate_sha256"], fingerprint.as_str(), "{tls}");
                assert!(tls["handshake_seconds"].as_f64().unwrap() > 0.0, "{tls}");
                assert!(tls["cipher_one_core_bits_per_second"].as_f64().unwrap() > 0.0, "{tls}");
            }
        }
        // -n counts per direction, shared among its streams.
        for (flow, bytes) in &per_direction {
            assert_eq!(*bytes, 6 << 20, "{cipher}: {flow}");
        }
        let client_trust: Vec<&Value> = streams
            .iter()
            .map(|s| match s["flow"].as_str().unwrap() {
                "client_to_agent" => &s["sender"]["tls"]["trust"],
                _ => &s["receiver"]["tls"]["trust"],
            })
            .collect();
        assert!(client_trust.iter().all(|t| *t == "announced"), "{client_trust:?}");
        // Both hosts' cipher speeds, and the agent's certificate in its facts.
        for end in ["client", "agent"] {
            let tls = &run[end]["facts"]["tls"];
            assert_eq!(tls["cipher_speeds"].as_array().unwrap().len(), 3, "{end}: {tls}");
        }
        assert_eq!(run["agent"]["facts"]["tls"]["certificate_sha256"], fingerprint.as_str());
        assert_eq!(run["agent"]["facts"]["tls"]["certificate_source"], "self-signed");
    }
    // A run over plain TCP records none of it.
    let plain = agent.run_json("tcp", &["-n", "1M"]);
    assert!(plain["agent"]["facts"].get("tls").is_none());
    assert!(plain["streams"][0]["sender"].get("tls").is_none());
}

#[test]
fn a_certificate_that_is_not_the_pinned_one_is_refused_before_any_data() {
    let agent = AgentProcess::start(&[]);
    let fingerprint = printed_fingerprint(&agent);
    let port = agent.port_arg();
    let wrong = "00".repeat(32);
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "--transport",
        "tls",
        "--tls-pin",
        &wrong,
        "-t",
        "2",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "the agent's TLS certificate is sha256:{fingerprint}, not sha256:{wrong}"
        )),
        "{err}"
    );
    assert!(err.contains("refused before any data"), "{err}");
    assert!(!err.contains("unexpected error"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "no result: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The agent serves on; the right pin, with colons, in capitals, is taken.
    let pin: Vec<String> = fingerprint
        .as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).to_uppercase())
        .collect();
    let run = agent.run_json("tcp", &["--transport", "tls", "--tls-pin", &pin.join(":"), "-n", "1M"]);
    let tls = &run["streams"][0]["sender"]["tls"];
    assert_eq!(tls["trust"], "pinned", "{tls}");
    assert_eq!(run["spec"]["params"]["tls"]["pin_sha256"], fingerprint.as_str());
}

/// Writes into `dir` a CA (`ca.pem`), a certificate it signed for
/// 127.0.0.1 and its key (`cert.pem`, `key.pem`), and another CA that
/// signed nothing (`other-ca.pem`).
fn write_ca_and_agent_certificate(dir: &std::path::Path) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "nicbench test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let other_key = rcgen::KeyPair::generate().unwrap();
    let mut other_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    other_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    other_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "another CA");
    let other = other_params.self_signed(&other_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
}

/// A CA, and a certificate it signed for 127.0.0.1, in `dir`: the agent
/// presents it (`serve --tls-cert/--tls-key`) and the client trusts the CA
/// (`--tls-ca`); a CA that signed nothing of the agent's is refused.
#[test]
fn an_agent_certificate_signed_by_a_given_ca_is_checked_against_it() {
    let dir = tempfile::tempdir().unwrap();
    write_ca_and_agent_certificate(dir.path());
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let agent = AgentProcess::start(&["--tls-cert", &path("cert.pem"), "--tls-key", &path("key.pem")]);
    assert!(agent.wait_for_log("TLS certificate (").contains(&path("cert.pem")));
    let run = agent.run_json("tcp", &["--transport", "tls", "--tls-ca", &path("ca.pem"), "-n", "1M"]);
    let tls = &run["streams"][0]["sender"]["tls"];
    assert_eq!(tls["trust"], "ca", "{tls}");
    assert_eq!(
        run["agent"]["facts"]["tls"]["certificate_source"],
        path("cert.pem").as_str()
    );

    let port = agent.port_arg();
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "--transport",
        "tls",
        "--tls-ca",
        &path("other-ca.pem"),
        "-n",
        "1M",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("TLS handshake of data stream 1") && err.contains("UnknownIssuer"),
        "{err}"
    );
}

/// Issue 67: the client sent `--tls-ca`'s path and the agent opened it, so
/// `--tls-ca` failed against an agent without the same file. Here the
/// client names its CA file relative to its own directory, and the agent
/// runs in another (empty) one where that name is no file: the client
/// reads the file, the agent never looks for it. (Before, the agent
/// refused the test: "--tls-ca ca.pem: no such file".) QUIC shakes hands
/// with the same trust.
#[test]
fn tls_ca_is_read_by_the_client_and_works_against_an_agent_without_the_file() {
    let client_dir = tempfile::tempdir().unwrap();
    let agent_dir = tempfile::tempdir().unwrap();
    write_ca_and_agent_certificate(client_dir.path());
    let path = |name: &str| client_dir.path().join(name).to_string_lossy().into_owned();
    let mut serve = std::process::Command::new(BIN);
    serve.current_dir(agent_dir.path());
    let agent = AgentProcess::start_with(
        serve,
        "127.0.0.1",
        &["--tls-cert", &path("cert.pem"), "--tls-key", &path("key.pem")],
    );
    assert!(!agent_dir.path().join("ca.pem").exists());
    let port = agent.port_arg();
    for transport in ["tls", "quic"] {
        let mut client = std::process::Command::new(BIN);
        client.current_dir(client_dir.path()).args([
            "tcp",
            "127.0.0.1",
            "-p",
            &port,
            "--transport",
            transport,
            "--tls-ca",
            "ca.pem",
            "-n",
            "1M",
            "--json",
            "--no-save",
        ]);
        let out = run_captured(&mut client, "nicbench tcp --tls-ca ca.pem");
        assert!(out.status.success(), "{transport}: {}", stderr(&out));
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        let tls = &run["spec"]["params"]["tls"];
        assert!(tls.get("ca_file").is_none(), "no path travels: {tls}");
        let pem = tls["ca_pem"].as_str().unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        let trust = &run["streams"][0]["sender"]["tls"]["trust"];
        assert_eq!(trust, "ca", "{transport}: {run}");
    }
}

/// Issue 67: an agent told a keyless client which of its files exist
/// (`ca_file` '/etc/shadow' taken, '/etc/does-not-exist' "no such file").
/// A spec naming a file is now refused whatever the file, in the same words,
/// and the agent serves on.
#[test]
fn a_spec_naming_a_file_for_the_agent_is_refused_without_a_look_at_it() {
    use super::rawclient::Raw;
    let mut agent = AgentProcess::start(&[]);
    let mut answers = Vec::new();
    for path in ["/etc/hostname", "/etc/does-not-exist"] {
        let spec = serde_json::json!({
            "workload": "tcp", "duration_seconds": 1.0, "streams": 1, "direction": "forward",
            "message_bytes": 131072, "interval_seconds": 1.0,
            "params": {"transport": "tls", "tls": {"ca_file": path}}
        });
        let request = serde_json::to_vec(&serde_json::json!({ "type": "test_request", "spec": spec })).unwrap();
        let answer = Raw::connect(agent.port)
            .hello()
            .frame(&request)
            .expect_error_and_close("an agent opens no file a client names");
        assert!(!answer.contains("/etc"), "{answer}");
        answers.push(answer);
    }
    assert_eq!(answers[0], answers[1], "one refusal, whatever the file");
    agent.assert_serves_normally();
}

#[test]
fn what_cannot_run_over_tls_is_refused_with_the_reason() {
    // Nothing listens here: every refusal comes before a connection.
    let closed = "127.0.0.1";
    let cases: [(&[&str], &str); 7] = [
        (
            &["tcp", closed, "--cipher", "aes256-gcm"],
            "apply to --transport tls or quic, not tcp",
        ),
        (&["tcp", closed, "--transport", "tls", "-Z"], "drop -Z"),
        (&["tcp", closed, "--transport", "tls", "--discard"], "drop --discard"),
        (
            &["tcp", closed, "--transport", "tls", "--tls-pin", "abc"],
            "64 hex digits",
        ),
        (
            &["tcp", closed, "--transport", "tls", "--tls-ca", "/nonexistent/ca.pem"],
            "no such file",
        ),
        (&["rr", closed, "--proto", "tls", "--spin"], "drop --spin"),
        (
            &["rr", closed, "--cipher", "aes128-gcm"],
            "apply to --transport tls or quic, not tcp",
        ),
    ];
    for (args, expected) in cases {
        let mut argv = args.to_vec();
        argv.extend(["-p", "1"]);
        let out = nicbench(&argv);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    let out = nicbench(&["files", closed, "-p", "1", "--generate", "1x1K", "--transport", "tls"]);
    assert!(
        stderr(&out).contains("files runs the kernel's stream loops"),
        "{}",
        stderr(&out)
    );
    let out = nicbench(&[
        "sweep",
        closed,
        "-p",
        "1",
        "--transport",
        "tcp",
        "--cipher",
        "aes256-gcm",
    ]);
    assert!(
        stderr(&out).contains("apply to --transport tls or quic, not tcp"),
        "{}",
        stderr(&out)
    );
}

/// This kernel has no kernel TLS (no CONFIG_TLS): `--ktls` is refused with
/// that reason. On a kernel with it, the refusal says nicbench does not
/// hand records to it yet.
#[test]
fn kernel_tls_is_refused_with_the_reason() {
    let out = nicbench(&["tcp", "127.0.0.1", "-p", "1", "--transport", "tls", "--ktls"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    match nicbench::probe::cipher::ktls_unavailable() {
        Some(_) => assert!(
            err.contains("has no kernel TLS") && err.contains("run without --ktls"),
            "{err}"
        ),
        None => assert!(err.contains("does not hand rustls' keys to it yet"), "{err}"),
    }
}

#[test]
fn rr_over_tls_counts_its_transactions_and_crr_a_handshake_for_each() {
    let agent = AgentProcess::start(&[]);
    let fingerprint = printed_fingerprint(&agent);
    let run = agent.run_json("rr", &["--proto", "tls", "-t", "1", "-r", "64,1K", "-P", "2"]);
    assert_eq!(run["spec"]["params"]["proto"], "tls", "{}", run["spec"]);
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "rr --proto tls");
    let transactions = count(&run["sum"]["rr"]["transactions"]);
    assert!(transactions > 0, "{}", run["sum"]);
    assert_eq!(count(&run["sum"]["rr"]["latency"]["samples"]), transactions);
    for s in run["streams"].as_array().unwrap() {
        let (sender, receiver) = (&s["sender"], &s["receiver"]);
        assert_eq!(sender["rr"]["transactions"], receiver["rr"]["transactions"], "{s}");
        for end in [sender, receiver] {
            assert_eq!(end["tls"]["cipher_suite"], "TLS13_AES_128_GCM_SHA256", "{end}");
            assert_eq!(end["tls"]["certificate_sha256"], fingerprint.as_str(), "{end}");
        }
        assert_eq!(sender["tls"]["trust"], "announced", "{sender}");
    }

    // A connection per transaction: each pays a handshake, on both ends.
    let crr = agent.run_json(
        "rr",
        &["--proto", "tls", "--crr", "-t", "1", "--cipher", "chacha20-poly1305"],
    );
    let s = &crr["streams"][0];
    let (sender, receiver) = (&s["sender"], &s["receiver"]);
    let connections = count(&sender["rr"]["connections"]);
    assert!(connections > 0, "{sender}");
    assert_eq!(count(&sender["tls"]["handshakes"]), connections, "{sender}");
    assert_eq!(
        count(&receiver["tls"]["handshakes"]),
        count(&receiver["rr"]["connections"]),
        "{receiver}"
    );
    assert_eq!(count(&receiver["rr"]["connections"]), connections, "{receiver}");
    assert_eq!(
        sender["tls"]["cipher_suite"], "TLS13_CHACHA20_POLY1305_SHA256",
        "{sender}"
    );
    assert!(sender["tls"]["handshake_seconds"].as_f64().unwrap() > 0.0, "{sender}");
    // The text names the handshakes and their mean.
    let port = agent.port_arg();
    let out = nicbench(&["rr", "127.0.0.1", "-p", &port, "--proto", "tls", "--crr", "-t", "0.5"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("TLS: TLSv1_3 TLS13_AES_128_GCM_SHA256 (rustls), handshake"),
        "{text}"
    );
}
