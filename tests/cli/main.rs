//! Integration tests: the real `nicbench` binary against a real agent.
//! One test binary; one module per area. Tests that need root, iproute2 or
//! another tool say why they skip, and fail instead under CI (`require!`).

/// The one guard for what a test needs from the machine (a tool, root, a
/// lab, IPv6 loopback). `require!(expr)` takes a `Result<T, String>`: Ok
/// gives the value, Err(why) ends the test. Outside CI it returns early and
/// says SKIPPED with why; when the `CI` variable is set (any value) it
/// fails, so CI cannot pass by skipping (.ci/run sets CI=true and installs
/// every tool). See [`common::skip_or_fail`].
macro_rules! require {
    ($needed:expr) => {
        match $needed {
            Ok(value) => value,
            Err(why) => {
                $crate::common::skip_or_fail(&why);
                return;
            }
        }
    };
}

/// [`require!`] a lab: root, CAP_NET_ADMIN and iproute2.
macro_rules! require_lab {
    () => {
        require!(nicbench::lab::unavailable().map_or(Ok(()), |why| Err(format!("lab unavailable: {why}"))))
    };
}

/// Every nicbench process these tests start saves its runs in a database
/// under the target directory, never in the user's (`~/.local/share`): the
/// variable is set before any test runs and inherited by every child
/// process. Tests of the store pass their own `--db`. Runs a store could
/// not take are spooled under the target directory too (`XDG_STATE_HOME`),
/// never in the user's `~/.local/state`.
#[used]
#[link_section = ".init_array"]
static ISOLATE_RESULTS_DATABASE: extern "C" fn() = isolate_results_database;

extern "C" fn isolate_results_database() {
    std::env::set_var(
        "NICBENCH_DB",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/cli-tests-results.db"),
    );
    std::env::set_var(
        "XDG_STATE_HOME",
        concat!(env!("CARGO_TARGET_TMPDIR"), "/cli-tests-state"),
    );
}

mod cases;
mod chart;
mod common;
mod compare;
mod demo;
mod doc_examples;
mod every_command;
mod extremes;
mod facts;
mod fair_slots;
mod files;
mod grafana;
mod help;
mod host_settings;
mod hostile;
mod image;
mod iperf3;
mod iperf3_auth;
mod iperf3_lab;
mod kubernetes;
mod lab;
mod lab_cpu;
mod layers;
mod linerate;
mod links;
mod loaded;
mod manual;
mod mesh;
mod metrics;
mod mptcp;
mod multicast;
mod multicast_sender;
mod multicast_switch;
mod outside_text;
mod plan;
mod plan_fanout;
mod postgres;
mod prometheus;
mod quic;
mod rawclient;
mod reflection;
mod relay;
mod release;
mod repeat;
mod result_schema;
mod rr;
mod schema;
mod service;
mod setup_deadline;
mod snapshots;
mod store;
mod store_import;
mod store_migration;
mod sweep;
mod tcp;
mod tls;
mod udp;
mod units;
mod unix;
mod usability;
mod verdict_scenarios;
mod watch;
