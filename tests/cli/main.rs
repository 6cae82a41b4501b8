//! Integration tests: the real `nicbench` binary against a real agent.
//! One test binary; one module per area. Tests that need root and iproute2
//! (the lab) say why they skip instead of passing silently.

/// Returns early from a lab test, saying why, when labs cannot be built
/// here (not root, no iproute2): a skip that says so, never a silent pass.
macro_rules! require_lab {
    () => {
        if let Some(why) = nicbench::lab::unavailable() {
            eprintln!("SKIPPED (lab unavailable): {why}");
            return;
        }
    };
}

mod common;
mod demo;
mod facts;
mod hostile;
mod iperf3;
mod lab;
mod layers;
mod rawclient;
mod repeat;
mod rr;
mod schema;
mod service;
mod sweep;
mod tcp;
mod udp;
