//! The control-protocol decoder and everything the agent does with a
//! decoded message before a test starts, on arbitrary bytes: frames fed in
//! pieces as the socket reader does, then hello checks, key-proof decoding,
//! workload lookup, spec validation and the operator's limits. Nothing here
//! may panic, allocate past the frame limit, or loop forever.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nicbench::protocol::limits::TestLimits;
use nicbench::protocol::framing::Decoder;
use nicbench::protocol::{auth, Message, MAX_CLIENT_FRAME};

fuzz_target!(|data: &[u8]| {
    let Some((&piece, bytes)) = data.split_first() else {
        return;
    };
    let piece = usize::from(piece).max(1);
    let mut decoder = Decoder::new(MAX_CLIENT_FRAME);
    let mut rest = bytes;
    loop {
        match decoder.next_message() {
            Ok(Some(message)) => {
                inspect(message);
                continue;
            }
            Ok(None) => {}
            Err(_) => return,
        }
        let Ok(want) = decoder.wanted() else { return };
        assert!(want > 0);
        if rest.is_empty() {
            return;
        }
        let n = want.min(piece).min(rest.len());
        decoder.push(&rest[..n]);
        assert!(decoder.pending() <= 4 + MAX_CLIENT_FRAME as usize);
        rest = &rest[n..];
    }
});

fn inspect(message: Message) {
    match message {
        Message::Hello(hello) => {
            let _ = hello.check_peer("client");
        }
        Message::AuthResponse { nonce, mac } => {
            let key = auth::Psk::from_bytes(b"fuzzing key of sixteen bytes");
            if let (Some(n), Some(m)) = (
                auth::hex_decode(&nonce, auth::NONCE_LEN),
                auth::hex_decode(&mac, auth::MAC_LEN),
            ) {
                let transcript = auth::Transcript {
                    client_to_agent: [0; auth::DIGEST_LEN],
                    agent_to_client: [0; auth::DIGEST_LEN],
                };
                let proof = auth::Handshake {
                    agent_nonce: &[0; auth::NONCE_LEN],
                    client_nonce: &n,
                    transcript: &transcript,
                };
                let _ = key.verify_client(&proof, &m);
                let _ = key.is_handshake_only_proof(&[0; auth::NONCE_LEN], &n, &m);
            }
        }
        Message::TestRequest { spec, .. } => {
            if let Ok(workload) = nicbench::workload::find(&spec.workload) {
                if workload.validate(&spec).is_ok() {
                    let _ = TestLimits::default().check(&spec);
                    let _ = spec.flows();
                }
            }
        }
        other => {
            let _ = serde_json::to_vec(&other);
        }
    }
}
