//! The agent's side of `set_mtu` and `set_host`: the MTU or one host
//! setting (offloads, rings, coalescing, root qdisc) on the interface
//! toward the client. Only with `--allow-host-changes`, only for a client
//! that proved the pre-shared key, never while a test runs; the value is
//! checked as a plan value would be, and the answer is the facts read
//! after the change (the client compares them with what it asked for).

use std::net::{IpAddr, SocketAddr};

use super::{Refusal, Shared};
use crate::model::HostSetting;
use crate::probe::host::facts_toward;
use crate::protocol::channel::Channel;
use crate::protocol::Message;

/// Answers one `set_host` request: `facts`, or an `error` with the reason.
pub(super) fn serve(
    channel: &mut Channel,
    peer: SocketAddr,
    local_ip: IpAddr,
    shared: &Shared,
    setting: &HostSetting,
) -> Result<(), Refusal> {
    let interface = change(shared, local_ip, setting).map_err(Refusal::Tell)?;
    log::info!("{peer}: {} set on {interface}", setting.describe());
    channel.send(&Message::Facts {
        facts: facts_toward(local_ip),
    })?;
    Ok(())
}

/// Applies `setting` to the interface holding `local_ip`; returns its name.
fn change(shared: &Shared, local_ip: IpAddr, setting: &HostSetting) -> Result<String, String> {
    if !shared.config.allow_host_changes {
        return Err(format!(
            "this agent does not change host settings: start it with --allow-host-changes \
             (and --psk-file) to let an authenticated client set its {}",
            setting.axis()
        ));
    }
    if shared.config.psk.is_none() {
        return Err("this agent changes host settings only for authenticated clients: start it with --psk-file".into());
    }
    setting.validate()?;
    let interface = crate::probe::nic::interface_with_address(local_ip)
        .ok_or_else(|| format!("no interface holds {local_ip}, the address the client reached"))?;
    if interface == "lo" {
        return Err("the client reached this agent over loopback; its settings are not changed".into());
    }
    if shared.admission.running() > 0 {
        return Err(format!(
            "a test is running on this agent; its {} is changed only between tests (try again, or use --wait)",
            setting.axis()
        ));
    }
    crate::probe::settings::apply(&interface, setting).map_err(|e| format!("{interface}: {e}"))?;
    Ok(interface)
}

/// Answers one `set_mtu` request: `facts`, or an `error` with the reason.
pub(super) fn serve_mtu(
    channel: &mut Channel,
    peer: SocketAddr,
    local_ip: IpAddr,
    shared: &Shared,
    mtu: u32,
) -> Result<(), Refusal> {
    let interface = change_mtu(shared, local_ip, mtu).map_err(Refusal::Tell)?;
    log::info!("{peer}: MTU of {interface} set to {mtu}");
    follow_in_lab(peer, &interface, mtu).map_err(Refusal::Tell)?;
    channel.send(&Message::Facts {
        facts: facts_toward(local_ip),
    })?;
    Ok(())
}

/// In a lab with a router between this agent and the client, sets the
/// router's links on the path to `mtu` too (the restore, a later
/// `set_mtu` with the original MTU, sets them back the same way): a plan's
/// MTU axis over a router lab then carries its packets instead of dropping
/// them at a router left at the old MTU. Nothing outside a lab.
fn follow_in_lab(peer: SocketAddr, interface: &str, mtu: u32) -> Result<(), String> {
    let Some(path) = crate::lab_env::path_from_here(peer.ip()) else {
        return Ok(());
    };
    let changes = crate::lab::follow::follow_mtu(&path, mtu).map_err(|e| {
        format!(
            "set MTU {mtu} on {interface}, but the router of lab '{}' between this agent and the client \
             did not follow: {e}",
            path.lab
        )
    })?;
    for change in changes {
        log::info!("{peer}: lab '{}': {}", path.lab, change.describe());
    }
    Ok(())
}

/// A client's request to set the MTU of the interface toward it: only
/// with `--allow-host-changes`, only for a client that proved the key, and
/// never while a test runs. Returns the interface's name.
fn change_mtu(shared: &Shared, local_ip: IpAddr, mtu: u32) -> Result<String, String> {
    if !shared.config.allow_host_changes {
        return Err(
            "this agent does not change host settings: start it with --allow-host-changes \
                    (and --psk-file) to let an authenticated client set its MTU"
                .into(),
        );
    }
    if shared.config.psk.is_none() {
        return Err("this agent changes host settings only for authenticated clients: start it with --psk-file".into());
    }
    if !(68..=65535).contains(&mtu) {
        return Err(format!("MTU {mtu} is outside 68 to 65535"));
    }
    let interface = crate::probe::nic::interface_with_address(local_ip)
        .ok_or_else(|| format!("no interface holds {local_ip}, the address the client reached"))?;
    if shared.admission.running() > 0 {
        return Err(
            "a test is running on this agent; its MTU is changed only between tests (try again, or use --wait)".into(),
        );
    }
    match crate::probe::mtu::set_mtu(&interface, mtu) {
        Ok(now) if now == mtu => Ok(interface),
        Ok(now) => Err(format!("set MTU {mtu} on {interface}, but it reads back as {now}")),
        Err(e) => Err(format!("cannot set the MTU of {interface} to {mtu}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::tests::{key, shared};
    use super::*;

    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn the_mtu_changes_only_when_the_operator_allows_it_with_a_key() {
        let closed = change_mtu(&shared(|_| {}), LOOPBACK, 9000).unwrap_err();
        assert!(closed.contains("start it with --allow-host-changes"), "{closed}");
        let keyless = change_mtu(&shared(|c| c.allow_host_changes = true), LOOPBACK, 9000).unwrap_err();
        assert!(keyless.contains("only for authenticated clients"), "{keyless}");
    }

    fn open_to_changes() -> Shared {
        shared(|c| {
            c.allow_host_changes = true;
            c.psk = Some(key());
        })
    }

    #[test]
    fn an_mtu_out_of_range_is_refused_before_the_interface_is_looked_up() {
        for mtu in [0, 67, 65536] {
            let e = change_mtu(&open_to_changes(), "192.0.2.1".parse().unwrap(), mtu).unwrap_err();
            assert_eq!(e, format!("MTU {mtu} is outside 68 to 65535"));
        }
        let e = change_mtu(&open_to_changes(), "192.0.2.1".parse().unwrap(), 1500).unwrap_err();
        assert!(e.contains("no interface holds 192.0.2.1"), "{e}");
    }

    #[test]
    fn the_mtu_is_not_changed_under_a_running_test() {
        let shared = open_to_changes();
        let _running = shared.admission.try_enter(Duration::from_secs(10)).unwrap();
        let e = change_mtu(&shared, LOOPBACK, 1500).unwrap_err();
        assert!(
            e.contains("a test is running on this agent; its MTU is changed only between tests"),
            "{e}"
        );
    }

    #[test]
    fn loopback_settings_are_never_changed() {
        let setting = HostSetting::Rings {
            rx: Some(512),
            tx: None,
        };
        let e = change(&open_to_changes(), LOOPBACK, &setting).unwrap_err();
        assert!(e.contains("over loopback"), "{e}");
    }
}
