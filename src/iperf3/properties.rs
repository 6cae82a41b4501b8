//! Property tests of everything that reads an iperf3 peer's bytes: the
//! length-prefixed JSON framing, the parameter and result decoders, the
//! server's translation into our spec, the client's reading of a
//! server's results, cookies, states and UDP headers, and the agent's
//! check of a client's RSA credentials (token, decrypted text, users
//! file). Any input is
//! decoded or refused with an error; nothing panics, nothing allocates
//! past the announced limit. The same paths run under libFuzzer in
//! `fuzz/fuzz_targets/iperf3_wire.rs` and `iperf3_port.rs` (bench/fuzz.sh).

use std::io::Read;
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::{Map, Number, Value};

use base64::Engine;

use super::server::spec_of;
use super::server_auth::{padding_for, parse_credentials, ServerAuth};
use super::streams::peer_report;
use super::wire::{
    self, decode_object, encode_json, read_json, Cookie, Params, Results, State, UdpHeader, WireError, MAX_PARAMS_JSON,
    MAX_RESULTS_JSON,
};
use crate::model::{Party, Role};
use crate::protocol::limits::TestLimits;
use crate::workload::transport::Proto;

/// A reader that counts what was taken from it, to show a refused
/// length is refused before its body is read.
struct Counting<'a> {
    bytes: &'a [u8],
    taken: usize,
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        self.taken += n;
        Ok(n)
    }
}

/// Numbers a hostile peer would pick: limits, off-by-ones, signs,
/// fractions, huge and tiny doubles, u64 beyond i64.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-3i64..=3).prop_map(Value::from),
        prop::sample::select(vec![
            0u64,
            1,
            127,
            128,
            129,
            8192,
            86_400,
            86_401,
            1 << 30,
            (1 << 32) + 1,
            u32::MAX as u64,
            u64::MAX,
            9_000_000_000_000_000,
        ])
        .prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![0.5, -0.0, 1e300, -1e300, 2.5, 1e-300, 86_400.5])
            .prop_map(|f| Value::Number(Number::from_f64(f).expect("finite"))),
    ]
}

/// Any JSON value, numbers biased as above, a few levels deep.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys iperf3 sends in its parameters, plus noise.
fn params_key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(
            crate::iperf3::wire::KNOWN_KEYS
                .iter()
                .copied()
                .chain(crate::iperf3::wire::TRANSPORTS.iter().map(|p| p.name()))
                .chain(["pacing_timer"])
                .collect::<Vec<_>>(),
        )
        .prop_map(String::from),
        "[a-zA-Z_]{1,10}",
    ]
}

/// A parameter object with iperf3's keys and any values.
fn params_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((params_key(), json()), 0..12).prop_map(|pairs| pairs.into_iter().collect())
}

/// A results object: iperf3's top-level keys and streams whose fields
/// take any value.
fn results_object() -> impl Strategy<Value = Map<String, Value>> {
    let stream_key = prop::sample::select(vec![
        "id",
        "bytes",
        "retransmits",
        "jitter",
        "errors",
        "packets",
        "start_time",
        "end_time",
    ]);
    let stream = prop::collection::vec((stream_key, prop_oneof![number(), json()]), 0..10)
        .prop_map(|pairs| Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    let top_key = prop::sample::select(vec![
        "cpu_util_total",
        "cpu_util_user",
        "cpu_util_system",
        "sender_has_retransmits",
        "congestion_used",
        "server_output_text",
        "server_output_json",
    ]);
    (
        prop::collection::vec((top_key, prop_oneof![number(), json()]), 0..8),
        prop_oneof![prop::collection::vec(stream, 0..6).prop_map(Value::Array), json(),],
    )
        .prop_map(|(pairs, streams)| {
            let mut m: Map<String, Value> = pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            m.insert("streams".into(), streams);
            m
        })
}

/// Parameters a client may legitimately send.
fn valid_params() -> impl Strategy<Value = Params> {
    (
        any::<bool>(),
        (0u64..=wire::MAX_TIME_SECONDS, 0u64..=wire::MAX_TIME_SECONDS),
        1u32..=wire::MAX_STREAMS,
        (any::<bool>(), any::<bool>(), any::<bool>()),
        (
            prop::option::of(1u64..=1 << 30),
            prop::option::of(1u64..=1 << 20),
            prop::option::of(1u64..=1 << 40),
        ),
        prop::option::of("[a-z]{1,12}"),
    )
        .prop_map(
            |(udp, (omit, time), parallel, (reverse, bidirectional, nodelay), (window, len, bandwidth), congestion)| {
                Params {
                    transport: if udp { Proto::UDP } else { Proto::TCP },
                    omit_seconds: omit,
                    time_seconds: time,
                    parallel,
                    reverse,
                    bidirectional,
                    window,
                    len,
                    bandwidth,
                    nodelay,
                    congestion,
                    client_version: Some("3.12".into()),
                    ..Params::default()
                }
            },
        )
}

/// What the agent does with a parameter object; checks what it accepts.
fn serve_params(map: &Map<String, Value>) {
    let Ok(params) = Params::from_json(map) else { return };
    check_credentials(&params);
    let limits = TestLimits::default();
    if let Ok(spec) = spec_of(&params, &limits) {
        assert!(spec.streams >= 1 && spec.streams <= wire::MAX_STREAMS);
        assert!(spec.duration_seconds > 0.0);
        assert!(spec.duration_seconds + spec.omit_seconds <= limits.max_duration_seconds);
        assert!(spec.message_bytes >= 1 && spec.message_bytes <= limits.max_message_bytes);
        assert!(spec.flows().len() <= 2 * wire::MAX_STREAMS as usize);
    }
}

/// What the client and the agent do with a peer's results.
fn read_results(map: &Map<String, Value>) {
    let Ok(results) = Results::from_json(map) else { return };
    assert!(results.streams.len() <= 2 * wire::MAX_STREAMS as usize);
    for transport in [Proto::TCP, Proto::UDP] {
        let streams: Vec<(u32, i64, Role)> = results
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    i as u32 + 1,
                    s.id,
                    if i % 2 == 0 { Role::Sender } else { Role::Receiver },
                )
            })
            .collect();
        let _ = peer_report(Party::Agent, &results, &streams, transport, 1460, 1.0);
        let _ = peer_report(Party::Client, &results, &[(1, 1, Role::Receiver)], transport, 0, 0.0);
    }
}

/// One agent key for every case (making a key takes long).
fn agent_key() -> &'static rsa::RsaPrivateKey {
    static KEY: OnceLock<rsa::RsaPrivateKey> = OnceLock::new();
    KEY.get_or_init(|| rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).expect("an RSA key"))
}

/// The agent's check with that key and one user.
fn server_auth() -> &'static ServerAuth {
    static AUTH: OnceLock<ServerAuth> = OnceLock::new();
    AUTH.get_or_init(|| {
        let users = format!("mario,{}\n", "ab".repeat(32));
        ServerAuth::new(agent_key().clone(), &users, "users.csv").expect("a users file")
    })
}

/// What the agent does with a client's credentials: anything but a token
/// made with its public key is refused, without a panic.
fn check_credentials(params: &Params) {
    let checked = server_auth().check(params.authtoken.as_deref(), params.client_version.as_deref(), 0);
    assert!(checked.is_err(), "{params:?}");
}

proptest! {
    #[test]
    fn any_token_is_refused_without_the_key(
        token in prop_oneof![
            ".{0,200}",
            prop::collection::vec(any::<u8>(), 128)
                .prop_map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
        ],
        version in prop::option::of(prop_oneof![Just("3.12".to_string()), Just("3.17".to_string()), ".{0,12}"]),
        now in any::<i64>(),
    ) {
        let checked = server_auth().check(Some(&token), version.as_deref(), now);
        prop_assert!(checked.is_err());
        let _ = padding_for(version.as_deref());
    }

    #[test]
    fn any_decrypted_text_is_read_or_refused(
        text in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            ("[a-z,]{0,8}", "\\PC{0,8}", any::<i64>())
                .prop_map(|(u, p, t)| format!("user: {u}\npwd:  {p}\nts:   {t}").into_bytes()),
        ],
    ) {
        if let Some((user, password, _)) = parse_credentials(&text) {
            prop_assert!(!user.is_empty() && !password.is_empty());
            prop_assert!(!user.contains(',') && !user.contains(char::is_whitespace));
        }
    }

    #[test]
    fn any_users_file_is_read_or_refused(text in "(([a-z#]{0,6},[0-9a-fA-Fx]{0,66})?\r?\n){0,6}|\\PC{0,200}") {
        if let Ok(auth) = ServerAuth::new(agent_key().clone(), &text, "users.csv") {
            prop_assert!(auth.user_count() >= 1);
        }
    }

    #[test]
    fn valid_parameters_round_trip_through_the_framing(p in valid_params()) {
        let frame = encode_json(&p.to_json());
        let map = read_json(&mut &frame[..], MAX_PARAMS_JSON).unwrap();
        prop_assert_eq!(Params::from_json(&map).unwrap(), p);
        serve_params(&map);
    }

    #[test]
    fn any_parameter_object_is_read_or_refused(map in params_object()) {
        serve_params(&map);
    }

    #[test]
    fn any_results_object_is_read_or_refused(map in results_object()) {
        read_results(&map);
    }

    #[test]
    fn any_bytes_are_a_frame_or_an_error(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        for max in [MAX_PARAMS_JSON, MAX_RESULTS_JSON] {
            let mut input = Counting { bytes: &bytes, taken: 0 };
            if let Ok(map) = read_json(&mut input, max) {
                serve_params(&map);
                read_results(&map);
            }
            prop_assert!(input.taken <= 4 + max as usize);
        }
        if let Ok(map) = decode_object(&bytes) {
            serve_params(&map);
            read_results(&map);
        }
        let _ = Cookie::parse(&bytes[..bytes.len().min(wire::COOKIE_LEN)]);
        for b in bytes.iter().take(16) {
            if let Ok(state) = State::from_byte(*b) {
                prop_assert_eq!(state.byte(), *b);
            }
        }
        for wide in [false, true] {
            if let Some(h) = UdpHeader::read(&bytes, wide) {
                let _ = h.send_nanos();
            }
        }
    }

    #[test]
    fn a_length_over_the_limit_is_refused_from_the_prefix_alone(
        length in (MAX_PARAMS_JSON + 1)..=u32::MAX,
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut frame = length.to_be_bytes().to_vec();
        frame.extend_from_slice(&tail);
        let mut input = Counting { bytes: &frame, taken: 0 };
        let refused = matches!(read_json(&mut input, MAX_PARAMS_JSON), Err(WireError::TooLong { .. }));
        prop_assert!(refused);
        prop_assert_eq!(input.taken, 4);
    }

    #[test]
    fn mutated_parameter_frames_are_read_or_refused(
        p in valid_params(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let mut frame = encode_json(&p.to_json());
        for (at, byte) in flips {
            let i = at % frame.len();
            frame[i] ^= byte;
        }
        let mut input = Counting { bytes: &frame, taken: 0 };
        if let Ok(map) = read_json(&mut input, MAX_PARAMS_JSON) {
            serve_params(&map);
        }
        prop_assert!(input.taken <= 4 + MAX_PARAMS_JSON as usize);
    }

    #[test]
    fn cookies_are_37_bytes_of_printable_ascii_ending_in_nul(bytes in prop::collection::vec(any::<u8>(), 37)) {
        let shaped = bytes[36] == 0 && bytes[..36].iter().all(|b| (0x21..=0x7e).contains(b));
        prop_assert_eq!(Cookie::parse(&bytes).is_ok(), shaped);
    }

    #[test]
    fn udp_headers_round_trip(sec in any::<u32>(), usec in 0u32..1_000_000, count in any::<u64>(), wide in any::<bool>()) {
        let h = UdpHeader { sec, usec, count: if wide { count } else { count & 0xffff_ffff } };
        let mut buf = [0u8; 16];
        h.write(&mut buf, wide);
        prop_assert_eq!(UdpHeader::read(&buf[..UdpHeader::len(wide)], wide), Some(h));
        prop_assert_eq!(UdpHeader::read(&buf[..UdpHeader::len(wide) - 1], wide), None);
    }
}
