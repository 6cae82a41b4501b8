//! The agent's side of `set_host`: one host setting (offloads, rings,
//! coalescing, root qdisc) on the interface toward the client. The same
//! rules as `set_mtu`: only with `--allow-host-changes`, only for a client
//! that proved the pre-shared key, never while a test runs; the setting is
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
