//! Everything that reads an iperf3 peer's bytes, on arbitrary bytes: the
//! length-prefixed JSON framing (with the parameter and the results
//! limits), the parameter decoder and the agent's translation of a
//! client's request into our spec under its limits, the results decoder
//! and the reading of a peer's results into our report (as the client
//! and as the agent), cookies, state bytes and UDP datagram headers.
//! Nothing here may panic, read past a refused length, or loop forever.
//! The stable property tests in src/iperf3/properties.rs run the same paths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nicbench::protocol::limits::TestLimits;
use nicbench::iperf3::server::spec_of;
use nicbench::iperf3::streams::peer_report;
use nicbench::iperf3::wire::{
    decode_object, read_json, Cookie, Params, Results, State, UdpHeader, COOKIE_LEN, MAX_PARAMS_JSON,
    MAX_RESULTS_JSON, MAX_STREAMS,
};
use nicbench::model::{Party, Role};
use nicbench::workload::transport::Proto;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    // Framing: the 4-byte length is checked before the body is read.
    for max in [MAX_PARAMS_JSON, MAX_RESULTS_JSON] {
        let mut input = data;
        if let Ok(map) = read_json(&mut input, max) {
            inspect(&map);
        }
        assert!(data.len() - input.len() <= 4 + max as usize);
    }
    // The body alone, so the fuzzer need not find a matching length first.
    if let Ok(map) = decode_object(data) {
        inspect(&map);
    }
    let _ = Cookie::parse(&data[..data.len().min(COOKIE_LEN)]);
    if let Some(&b) = data.first() {
        if let Ok(state) = State::from_byte(b) {
            assert_eq!(state.byte(), b);
        }
    }
    for wide in [false, true] {
        if let Some(h) = UdpHeader::read(data, wide) {
            let _ = h.send_nanos();
        }
    }
    if data.len() >= 8 {
        let i_errno = i32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        let errno = i32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        let _ = nicbench::iperf3::describe_server_error(i_errno, errno);
    }
});

fn inspect(map: &Map<String, Value>) {
    if let Ok(params) = Params::from_json(map) {
        let limits = TestLimits::default();
        if let Ok(spec) = spec_of(&params, &limits) {
            assert!(spec.streams >= 1 && spec.streams <= MAX_STREAMS);
            assert!(spec.duration_seconds + spec.omit_seconds <= limits.max_duration_seconds);
            let _ = spec.flows();
        }
    }
    if let Ok(results) = Results::from_json(map) {
        for transport in [Proto::TCP, Proto::UDP] {
            let streams: Vec<(u32, i64, Role)> = results
                .streams
                .iter()
                .enumerate()
                .map(|(i, s)| (i as u32 + 1, s.id, if i % 2 == 0 { Role::Sender } else { Role::Receiver }))
                .collect();
            let _ = peer_report(Party::Agent, &results, &streams, transport, 1460, 1.0);
            let _ = peer_report(Party::Client, &results, &[(1, 1, Role::Receiver)], transport, 0, 0.0);
        }
    }
}
