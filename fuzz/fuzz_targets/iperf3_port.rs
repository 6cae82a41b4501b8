//! What a client sends the agent's iperf3 port before it is admitted, on
//! arbitrary bytes: the parameter frame (length checked against 8 KiB
//! before the body is read, then JSON, then iperf3's keys with their
//! types and ranges), and its RSA credentials as the agent checks them
//! (`iperf3::server_auth`): the `authtoken` (base64, one block of the
//! key, decryption with the padding the client's version implies), the
//! decrypted text (`user: ... pwd: ... ts: ...`) and the authorized-users
//! file. Nothing here may panic or loop, and nothing without the agent's
//! key may pass. The stable property tests in src/iperf3/properties.rs
//! run the same paths.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use nicbench::iperf3::server_auth::{padding_for, parse_credentials, ServerAuth};
use nicbench::iperf3::wire::{decode_object, read_json, Params, MAX_PARAMS_JSON};
use serde_json::{Map, Value};

/// The agent's key, made once (a 1024-bit key takes a while), and one user.
fn agent_key() -> &'static rsa::RsaPrivateKey {
    static KEY: OnceLock<rsa::RsaPrivateKey> = OnceLock::new();
    KEY.get_or_init(|| rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).expect("an RSA key"))
}

fn server_auth() -> &'static ServerAuth {
    static AUTH: OnceLock<ServerAuth> = OnceLock::new();
    AUTH.get_or_init(|| {
        let users = format!("mario,{}\n", "ab".repeat(32));
        ServerAuth::new(agent_key().clone(), &users, "users.csv").expect("a users file")
    })
}

fuzz_target!(|data: &[u8]| {
    // The parameter frame, as the port reads it after PARAM_EXCHANGE.
    let mut input = data;
    if let Ok(map) = read_json(&mut input, MAX_PARAMS_JSON) {
        check(&map);
    }
    assert!(data.len() - input.len() <= 4 + MAX_PARAMS_JSON as usize);
    // The body alone, so the fuzzer need not find a matching length first.
    if let Ok(map) = decode_object(data) {
        check(&map);
    }
    // The bytes as a token, a version, a decrypted text and a users file.
    let text = String::from_utf8_lossy(data);
    let _ = padding_for(Some(&*text));
    assert!(server_auth().check(Some(&*text), Some("3.12"), 0).is_err());
    assert!(server_auth().check(Some(&*text), None, 0).is_err());
    if let Some((user, password, _)) = parse_credentials(data) {
        assert!(!user.is_empty() && !password.is_empty());
        assert!(!user.contains(',') && !user.contains(char::is_whitespace));
    }
    if let Ok(auth) = ServerAuth::new(agent_key().clone(), &text, "users.csv") {
        assert!(auth.user_count() >= 1);
    }
});

/// What the port does with a parameter object before the slot: read it,
/// check the credentials it carries (never valid without the key).
fn check(map: &Map<String, Value>) {
    if let Ok(params) = Params::from_json(map) {
        let checked = server_auth().check(params.authtoken.as_deref(), params.client_version.as_deref(), 0);
        assert!(checked.is_err());
    }
}
