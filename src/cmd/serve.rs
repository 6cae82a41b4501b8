//! `nicbench serve`

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;

use anyhow::Context;

use super::signals;
use crate::agent::limits::TestLimits;
use crate::agent::{Agent, AgentConfig};
use crate::cli::ServeArgs;
use crate::protocol::auth::Psk;

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    limit_malloc_arenas();
    let psk = match &args.psk_file {
        Some(path) => {
            warn_if_readable_by_others(path);
            Some(Psk::from_file(path).context("--psk-file")?)
        }
        None => None,
    };
    let ips: Vec<IpAddr> = match args.bind {
        Some(ip) => vec![ip],
        // Dual-stack where the host has IPv6, plain IPv4 otherwise.
        None => vec![IpAddr::V6(Ipv6Addr::UNSPECIFIED), IpAddr::V4(Ipv4Addr::UNSPECIFIED)],
    };
    let mut last_error = None;
    let mut agent = None;
    for ip in ips {
        let mut config = AgentConfig::new(SocketAddr::new(ip, args.port));
        config.once = args.once;
        config.limits = TestLimits {
            max_duration_seconds: args.max_duration.as_secs_f64(),
            max_streams: args.max_streams,
            max_message_bytes: args.max_message,
            max_buffer_bytes: args.max_buffer,
            max_rate_bits_per_second: args.max_rate.map(|r| r as f64),
        };
        config.max_concurrent = args.max_concurrent as usize;
        config.max_queue = args.max_queue as usize;
        config.max_connections = args.max_connections as usize;
        config.max_connections_per_minute = args.max_connections_per_minute;
        config.psk = psk.clone();
        config.handshake_timeout = args.handshake_timeout;
        config.iperf3_listen = args.iperf3_port.map(|port| SocketAddr::new(ip, port));
        config.iperf3_wait = args.iperf3_wait;
        match Agent::bind(config) {
            Ok(a) => {
                agent = Some(a);
                break;
            }
            Err(e) => last_error = Some(e),
        }
    }
    let agent = match agent {
        Some(a) => a,
        None => return Err(last_error.expect("at least one address was tried")).context("starting the agent"),
    };
    signals::install();
    let shutdown = agent.shutdown_flag();
    std::thread::spawn(move || loop {
        if signals::interrupted() {
            crate::logging::warn("signal received: finishing the running test, then stopping (again to exit at once)");
            shutdown.store(true, Ordering::Relaxed);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    });
    eprintln!(
        "nicbench agent {} listening on {}",
        env!("CARGO_PKG_VERSION"),
        agent.local_addr()
    );
    if let Some(addr) = agent.iperf3_addr() {
        eprintln!(
            "nicbench agent {} listening for iperf3 clients on {addr}",
            env!("CARGO_PKG_VERSION")
        );
        // Saving iperf3 tests to the results store (issue 12) plugs in here:
        // agent.on_iperf3_result(Arc::new(move |run| store.save(run))).
    }
    agent.serve();
    Ok(())
}

/// A key others can read is no secret: say so (but run, the operator may
/// have reasons).
fn warn_if_readable_by_others(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            crate::logging::warn(&format!(
                "the pre-shared key file {} is readable by other users; 'chmod 600 {}'",
                path.display(),
                path.display()
            ));
        }
    }
}

/// A long-running agent starts new threads for every test, and glibc gives
/// threads their own malloc arenas (up to 8 per core), each keeping its
/// high-water mark: the soak test saw resident memory step up by ~1 MiB a
/// minute that way (5.7 -> 8.7 MiB in 3 minutes), flat with one arena. No hot
/// loop allocates, so two arenas cost nothing and keep the agent's footprint flat.
fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator tuning; called before any test thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
