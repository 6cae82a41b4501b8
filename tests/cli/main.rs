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

/// Every nicbench process these tests start saves its runs in a database
/// under the target directory, never in the user's (`~/.local/share`): the
/// variable is set before any test runs and inherited by every child
/// process. Tests of the store pass their own `--db`.
#[used]
#[link_section = ".init_array"]
static ISOLATE_RESULTS_DATABASE: extern "C" fn() = isolate_results_database;

extern "C" fn isolate_results_database() {
    std::env::set_var(
        "NICBENCH_DB",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/cli-tests-results.db"),
    );
}

mod common;
mod demo;
mod facts;
mod files;
mod host_settings;
mod hostile;
mod iperf3;
mod iperf3_auth;
mod iperf3_lab;
mod kubernetes;
mod lab;
mod layers;
mod linerate;
mod links;
mod manual;
mod mesh;
mod metrics;
mod pictures;
mod plan;
mod prometheus;
mod rawclient;
mod repeat;
mod result_schema;
mod rr;
mod schema;
mod service;
mod snapshots;
mod store;
mod store_import;
mod store_migration;
mod sweep;
mod tcp;
mod udp;
mod usability;
mod watch;
