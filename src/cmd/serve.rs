//! `nicbench serve`

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;

use super::signals;
use super::UsageError;
use crate::agent::{Agent, AgentConfig};
use crate::cli::ServeArgs;
use crate::iperf3::server_auth::ServerAuth;
use crate::protocol::auth::Psk;
use crate::protocol::limits::TestLimits;
use crate::store::{RunMeta, RunWriter, Store, Tag};

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    limit_malloc_arenas();
    let psk = match &args.psk_file {
        Some(path) => {
            warn_if_readable_by_others(path, "the pre-shared key file");
            Some(Psk::from_file(path).context("--psk-file")?)
        }
        None => None,
    };
    let iperf3_auth = iperf3_auth(&args)?;
    // A given certificate that cannot be used stops the agent; a
    // self-signed one that cannot be made only leaves TLS tests refused.
    let certificate = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            Some(crate::workload::transport::tls::cert::serve_given(cert, key).map_err(UsageError)?)
        }
        _ => crate::workload::transport::tls::cert::serving()
            .map_err(|e| log::warn!("no TLS certificate, so no TLS tests: {e}"))
            .ok(),
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
            max_test_memory_bytes: args.max_test_memory,
            max_rate_bits_per_second: args.max_rate.map(|r| r as f64),
        };
        config.max_concurrent = args.max_concurrent as usize;
        config.max_queue = args.max_queue as usize;
        config.max_connections = args.max_connections as usize;
        config.max_connections_per_minute = args.max_connections_per_minute;
        config.max_connections_per_address = args.max_connections_per_address as usize;
        config.ipv6_prefix_per_address = args.ipv6_prefix_per_address;
        config.psk = psk.clone();
        config.handshake_timeout = args.handshake_timeout;
        config.iperf3_listen = args.iperf3_port.map(|port| SocketAddr::new(ip, port));
        config.iperf3_wait = args.iperf3_wait;
        config.iperf3_auth = iperf3_auth.clone();
        config.allow_host_changes = args.allow_host_changes;
        config.allow_peer_tests = args.allow_peer_tests;
        config.settings = args.workloads.settings.clone();
        match Agent::bind(config) {
            Ok(a) => {
                agent = Some(a);
                break;
            }
            // Only a host without IPv6 falls back to IPv4; any other failure
            // of the dual-stack address (port in use...) is the answer.
            Err(e) if ip.is_ipv6() && args.bind.is_none() && !e.ipv6_unavailable() => {
                last_error = Some(e);
                break;
            }
            Err(e) => last_error = Some(e),
        }
    }
    let agent = match agent {
        Some(a) => a,
        None => return Err(last_error.expect("at least one address was tried")).context("starting the agent"),
    };
    let watcher = signals::AgentSignals::watch(agent.shutdown_flag()).context("handling SIGINT and SIGTERM")?;
    eprintln!(
        "nicbench agent {} listening on {}",
        env!("CARGO_PKG_VERSION"),
        agent.local_addr()
    );
    if let Some(certificate) = &certificate {
        eprintln!(
            "TLS certificate ({}): sha256:{}",
            certificate.source.escape_debug(),
            crate::workload::transport::tls::cert::with_colons(&certificate.sha256)
        );
    }
    if let Some(addr) = agent.iperf3_addr() {
        let auth = match &iperf3_auth {
            Some(a) => format!(" (RSA authentication, {} user(s))", a.user_count()),
            None => String::new(),
        };
        eprintln!(
            "nicbench agent {} listening for iperf3 clients on {addr}{auth}",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(path) = &args.db {
            let store = Store::open(path).context("--db: the database for iperf3 tests")?;
            eprintln!("saving iperf3 clients' tests in {}", path.display());
            agent.on_iperf3_result(iperf3_saver(store, args.tags.clone()));
        }
    }
    let _metrics =
        super::serve_metrics::start(&args, agent.local_addr(), agent.connection_gate()).context("--metrics-listen")?;
    agent.serve();
    watcher.stop();
    Ok(())
}

/// iperf3's RSA authentication for --iperf3-port, loaded and checked
/// before anything listens. With --psk-file it is required: the key
/// would not cover the iperf3 port otherwise.
fn iperf3_auth(args: &ServeArgs) -> anyhow::Result<Option<Arc<ServerAuth>>> {
    match (&args.iperf3_rsa_private_key, &args.iperf3_authorized_users) {
        (Some(key), Some(users)) => {
            warn_if_readable_by_others(key, "the iperf3 private key file");
            let auth = ServerAuth::load(key, users)
                .map_err(|e| UsageError(format!("--iperf3-rsa-private-key/--iperf3-authorized-users: {e}")))?;
            Ok(Some(Arc::new(auth)))
        }
        _ if args.psk_file.is_some() && args.iperf3_port.is_some() => Err(UsageError(
            "--psk-file does not cover --iperf3-port: iperf3 clients cannot prove the pre-shared key, so \
             the agent will not open that port to anybody. Give iperf3's own authentication with \
             --iperf3-rsa-private-key FILE (PEM, e.g. 'openssl genrsa -out private.pem 2048') and \
             --iperf3-authorized-users FILE (lines USER,SHA256 of \"{USER}PASSWORD\"), or drop --iperf3-port"
                .into(),
        )
        .into()),
        _ => Ok(None),
    }
}

/// Saves each test an iperf3 client ran: one store, one run at a time.
fn iperf3_saver(store: Store, tags: Vec<Tag>) -> crate::agent::Iperf3ResultSink {
    let store = std::sync::Mutex::new(Some(store));
    std::sync::Arc::new(move |run| {
        let mut slot = store.lock().unwrap_or_else(|p| p.into_inner());
        let Some(open) = slot.take() else { return };
        let meta = RunMeta {
            command_line: format!("iperf3 client {} (served on --iperf3-port)", run.client.address),
            tags: tags.clone(),
            trials_planned: Some(1),
            source: None,
        };
        let mut writer = RunWriter::new(open, meta);
        match writer.finish(run, None) {
            Ok(id) => log::info!("iperf3 test from {} saved as run {id}", run.client.address),
            Err(e) => log::warn!("saving the iperf3 test from {} failed: {e}", run.client.address),
        }
        *slot = Some(writer.into_store());
    })
}

/// A key others can read is no secret: say so (but run, the operator may
/// have reasons).
fn warn_if_readable_by_others(path: &std::path::Path, what: &str) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            log::warn!(
                "{what} {} is readable by other users; 'chmod 600 {}'",
                path.display(),
                path.display()
            );
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
