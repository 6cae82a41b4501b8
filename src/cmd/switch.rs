//! The lab switch's view of a group test: when the command runs inside a
//! switch lab (`nicbench lab exec`), the bridge's IGMP/MLD counters are
//! read before the test and after it, and its multicast database (mdb)
//! for the test's group once the warm-up is over (the receivers have
//! joined): see [`Watch`]. Outside a switch lab, or where the switch's
//! namespace cannot be read, there is no record and a reason instead.

use std::net::IpAddr;
use std::sync::mpsc;
use std::sync::Mutex;

use crate::lab_env::{self, LabSwitch};
use crate::model::switch::{McastCounters, MdbMember, PortCounters, SwitchCounters, SwitchRecord};
use crate::probe::bridge::{self, BridgeCounters, MdbEntry};
use crate::workload::runner::{IntervalCallback, IntervalTick};

/// The switch of the lab this command runs in, watched around one test.
pub struct Watch {
    switch: LabSwitch,
    group: IpAddr,
    before: BridgeCounters,
}

impl Watch {
    /// Finds the lab's switch and reads its counters before the test;
    /// the error says why there is nothing to watch.
    pub fn start(group: IpAddr) -> Result<Watch, String> {
        let switch = lab_env::switch_here()?;
        let before = bridge::counters(&switch.netns, &switch.bridge).map_err(|e| e.to_string())?;
        if !before.snooping {
            return Err(format!(
                "bridge {} in {} does not snoop IGMP/MLD (mcast_snooping 0): it floods every group and keeps no mdb",
                switch.bridge, switch.netns
            ));
        }
        Ok(Watch { switch, group, before })
    }

    /// The bridge's mdb entries for the group, read now.
    pub fn mdb_now(&self) -> Result<Vec<MdbEntry>, String> {
        let entries = bridge::mdb(&self.switch.netns, &self.switch.bridge).map_err(|e| e.to_string())?;
        Ok(entries.into_iter().filter(|e| e.group == self.group).collect())
    }

    /// The record of the test: the mdb read during it (`mdb`; None when
    /// the test ended before its warm-up did) and the counters' change
    /// from before it to now.
    pub fn finish(self, mdb: Option<Result<Vec<MdbEntry>, String>>) -> Result<SwitchRecord, String> {
        let entries =
            mdb.ok_or_else(|| "the test ended before its warm-up did, so the mdb was not read".to_string())??;
        let after = bridge::counters(&self.switch.netns, &self.switch.bridge).map_err(|e| e.to_string())?;
        record(&self.switch, self.group, &entries, &self.before, &after)
    }
}

/// The record from what was read: each mdb entry and port by the lab host
/// behind it.
fn record(
    switch: &LabSwitch,
    group: IpAddr,
    entries: &[MdbEntry],
    before: &BridgeCounters,
    after: &BridgeCounters,
) -> Result<SwitchRecord, String> {
    let port = |name: &str| switch.ports.iter().find(|p| p.port == name);
    let went_back = |what: &str| {
        format!(
            "{what}'s multicast counters went back during the test (was bridge {} made anew?)",
            switch.bridge
        )
    };
    let bridge = after
        .bridge
        .since(&before.bridge)
        .ok_or_else(|| went_back(&switch.bridge))?;
    let mut ports = Vec::with_capacity(after.ports.len());
    for (name, now) in &after.ports {
        // A port added during the test counted from zero.
        let earlier = before
            .ports
            .iter()
            .find(|(n, _)| n == name)
            .map_or(McastCounters::default(), |(_, c)| *c);
        let counters = now.since(&earlier).ok_or_else(|| went_back(name))?;
        ports.push(PortCounters {
            port: name.clone(),
            host: port(name).map(|p| p.host.clone()),
            address: port(name).map(|p| p.address),
            counters,
        });
    }
    // In the order of the bridge's ports (the lab's hosts), not the kernel's hash.
    let mut entries: Vec<&MdbEntry> = entries.iter().collect();
    entries.sort_by_key(|e| after.ports.iter().position(|(n, _)| *n == e.port).unwrap_or(usize::MAX));
    let mdb = entries
        .into_iter()
        .map(|e| MdbMember {
            port: e.port.clone(),
            host: port(&e.port).map(|p| p.host.clone()),
            state: e.state.clone(),
            source: e.source,
        })
        .collect();
    Ok(SwitchRecord {
        lab: switch.lab.clone(),
        namespace: switch.netns.clone(),
        bridge: switch.bridge.clone(),
        group,
        mdb,
        counters: SwitchCounters { bridge, ports },
    })
}

/// An interval callback that says once, on `tell`, that the warm-up is
/// over (the first interval outside it has been sampled).
pub fn on_warmup_end(tell: mpsc::SyncSender<()>) -> IntervalCallback {
    let tell = Mutex::new(Some(tell));
    Box::new(move |tick: &IntervalTick| {
        if !tick.omitted {
            if let Some(tell) = tell.lock().unwrap_or_else(|e| e.into_inner()).take() {
                // The reader may have gone (it never does before the test ends).
                let _ = tell.try_send(());
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab_env::SwitchPort;
    use crate::model::switch::Both;

    fn reports(received: u64) -> McastCounters {
        McastCounters {
            igmp_reports: Both { received, sent: 0 },
            ..McastCounters::default()
        }
    }

    fn switch() -> LabSwitch {
        LabSwitch {
            lab: "demo".into(),
            netns: "nicbench-demo-sw".into(),
            bridge: "br0".into(),
            ports: vec![
                SwitchPort {
                    port: "eth0".into(),
                    host: "a".into(),
                    address: "10.200.0.1".parse().unwrap(),
                },
                SwitchPort {
                    port: "eth1".into(),
                    host: "b".into(),
                    address: "10.200.0.2".parse().unwrap(),
                },
            ],
        }
    }

    fn counters(eth0: u64, eth1: u64, extra: Option<u64>) -> BridgeCounters {
        let mut ports = vec![("eth0".to_string(), reports(eth0)), ("eth1".to_string(), reports(eth1))];
        if let Some(n) = extra {
            ports.push(("eth9".to_string(), reports(n)));
        }
        BridgeCounters {
            snooping: true,
            bridge: reports(eth0 + eth1),
            ports,
        }
    }

    #[test]
    fn the_record_names_each_port_by_its_host_and_counts_the_change() {
        let entry = |port: &str| MdbEntry {
            port: port.into(),
            group: "239.1.2.3".parse().unwrap(),
            source: None,
            state: "temp".into(),
        };
        let entries = vec![entry("eth9"), entry("eth1")];
        let group = "239.1.2.3".parse().unwrap();
        let r = record(
            &switch(),
            group,
            &entries,
            &counters(1, 2, None),
            &counters(1, 5, Some(4)),
        )
        .unwrap();
        // In the ports' order; a port no lab host is on has no host.
        let mdb: Vec<(&str, Option<&str>)> = r.mdb.iter().map(|m| (m.port.as_str(), m.host.as_deref())).collect();
        assert_eq!(mdb, [("eth1", Some("b")), ("eth9", None)]);
        assert_eq!(r.counters.bridge.igmp_reports.received, 3);
        let b = r.port_toward("10.200.0.2".parse().unwrap()).unwrap();
        assert_eq!((b.port.as_str(), b.counters.igmp_reports.received), ("eth1", 3));
        assert_eq!(r.counters.ports[0].counters.igmp_reports.received, 0);
        // A port no lab host is on, added during the test: counted from zero.
        let extra = &r.counters.ports[2];
        assert_eq!((extra.host.as_ref(), extra.counters.igmp_reports.received), (None, 4));
        let back = record(&switch(), group, &entries, &counters(1, 5, None), &counters(1, 2, None)).unwrap_err();
        assert!(back.contains("went back"), "{back}");
    }

    #[test]
    fn the_warmup_end_is_told_once_at_the_first_interval_outside_it() {
        let (tell, heard) = mpsc::sync_channel(1);
        let callback = on_warmup_end(tell);
        let tick = |omitted| IntervalTick {
            start_seconds: 0.0,
            end_seconds: 1.0,
            omitted,
            streams: vec![],
        };
        callback(&tick(true));
        assert!(heard.try_recv().is_err(), "not inside the warm-up");
        callback(&tick(false));
        callback(&tick(false));
        assert_eq!(heard.try_recv(), Ok(()));
        drop(callback);
        assert!(heard.recv().is_err(), "told once, then the sender is gone");
    }
}
