//! What `lab exec` tells the command it starts about the lab
//! ([`crate::lab_env`]'s variables): the lab's name, each host's addresses
//! and the router link toward each.

use crate::lab_env::{EnvCores, EnvHost, EnvLink, EnvRouter, LabEnv, RouterLink, LAB_VAR, PATHS_VAR, SCHEMA};

use super::spec::{tbf_sizes, BRIDGE};
use super::state::LabState;
use super::Topology;

/// The environment of a command run in `host` of the lab `state` describes.
pub fn client_env(state: &LabState, host: &str) -> LabEnv {
    // The lab's forwarding host: the router, or the switch (whose port
    // toward a host is that host's bottleneck as a router's link is).
    let forwarder = state.hosts.iter().find(|h| h.router);
    let router = forwarder.map(|h| EnvRouter {
        name: h.name.clone(),
        netns: h.netns.clone(),
        bridge: (state.topology == Topology::Switch).then(|| BRIDGE.to_string()),
    });
    let hosts = state
        .hosts
        .iter()
        .filter(|h| !h.router)
        .map(|h| EnvHost {
            name: h.name.clone(),
            links: state
                .links_of(&h.name)
                .iter()
                .map(|link| {
                    let mine = link.end_of(&h.name).expect("a link of this host");
                    let router_link = forwarder.and_then(|f| link.end_of(&f.name)).map(|r| RouterLink {
                        iface: r.ifname.clone(),
                        rate_bits_per_second: r.rate_bits_per_second,
                        queue_seconds: r
                            .rate_bits_per_second
                            .map(|bits| tbf_sizes(bits, link.mtu, r.queue_seconds).queue_seconds(bits)),
                        mtu: link.mtu,
                    });
                    EnvLink {
                        address: mine.address.into(),
                        router_link,
                    }
                })
                .collect(),
        })
        .collect();
    let cores = state.host(host).filter(|h| !h.cores.is_empty()).map(|h| EnvCores {
        cores: h.cores.clone(),
        shared: h.cores_shared,
    });
    LabEnv {
        schema: SCHEMA.to_string(),
        lab: state.name.clone(),
        host: host.to_string(),
        router,
        hosts,
        cores,
    }
}

/// The variables `lab exec` sets for a command in `host`: `(name, value)`.
pub fn client_vars(state: &LabState, host: &str) -> [(&'static str, String); 2] {
    [
        (LAB_VAR, state.name.clone()),
        (PATHS_VAR, client_env(state, host).to_json()),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::spec::{layout, parse_queue_setting, parse_rate_setting, LabSpec};
    use super::super::Topology;
    use super::*;

    fn lab(topology: Topology, rate: &[&str]) -> LabState {
        lab_queued(topology, rate, &[])
    }

    fn lab_queued(topology: Topology, rate: &[&str], queue: &[&str]) -> LabState {
        layout(&LabSpec {
            name: "demo".into(),
            hosts: 3,
            links: 1,
            topology,
            mtu: vec![],
            rate: rate.iter().map(|r| parse_rate_setting(r).unwrap()).collect(),
            queue: queue.iter().map(|q| parse_queue_setting(q).unwrap()).collect(),
            cpu_limits: vec![],
            offloads: vec![],
            cores: Default::default(),
            mptcp: false,
            agent_port: Some(5310),
        })
        .unwrap()
    }

    #[test]
    fn a_client_behind_the_router_finds_the_router_links_toward_both_ends() {
        // Link 2 joins b and r; only the router's egress toward b is shaped.
        let state = lab(Topology::ViaRouter, &["2:b=50mbit"]);
        let env = client_env(&state, "a");
        let parsed = LabEnv::parse("demo", &env.to_json()).unwrap();
        let b = state.links[1].end_of("b").unwrap().address;
        let path = parsed.path_to(b.into()).unwrap();
        assert_eq!(path.router_netns, "nicbench-demo-r");
        assert_eq!(path.toward_peer.iface, state.links[1].end_of("r").unwrap().ifname);
        assert_eq!(path.toward_peer.rate_bits_per_second, Some(50_000_000));
        // The default queue: 20 ms of the rate in all (125000 B), less the
        // 25000 B bucket, at 50 Mbit/s.
        let queue = path.toward_peer.queue_seconds.unwrap();
        assert!((queue - 0.016).abs() < 1e-9, "{queue}");
        assert_eq!(path.toward_peer.mtu, 1500);
        assert_eq!(path.toward_me.iface, state.links[0].end_of("r").unwrap().ifname);
        assert_eq!(
            (path.toward_me.rate_bits_per_second, path.toward_me.queue_seconds),
            (None, None)
        );
    }

    #[test]
    fn a_client_on_a_switch_finds_the_ports_toward_both_ends() {
        // Link 3 joins c and the switch; its port toward c is shaped.
        let state = lab(Topology::Switch, &["3:c=50mbit"]);
        let env = LabEnv::parse("demo", &client_env(&state, "a").to_json()).unwrap();
        let c = state.links[2].end_of("c").unwrap().address;
        let path = env.path_to(c.into()).unwrap();
        assert_eq!(path.router_netns, "nicbench-demo-sw");
        assert_eq!(path.toward_peer.iface, "eth2");
        assert_eq!(path.toward_peer.rate_bits_per_second, Some(50_000_000));
        assert_eq!(path.toward_me.iface, "eth0");
        assert_eq!(path.toward_me.rate_bits_per_second, None);
        // The switch's bridge and the port toward each host.
        let switch = env.switch().unwrap();
        assert_eq!(
            (switch.netns.as_str(), switch.bridge.as_str()),
            ("nicbench-demo-sw", "br0")
        );
        let ports: Vec<(&str, &str)> = switch
            .ports
            .iter()
            .map(|p| (p.port.as_str(), p.host.as_str()))
            .collect();
        assert_eq!(ports, [("eth0", "a"), ("eth1", "b"), ("eth2", "c")]);
        assert_eq!(switch.ports[2].address, std::net::IpAddr::from(c));
        let routed = lab(Topology::ViaRouter, &[]);
        let env = LabEnv::parse("demo", &client_env(&routed, "a").to_json()).unwrap();
        assert!(env.switch().is_err());
    }

    #[test]
    fn a_router_queue_reaches_the_clients_as_set() {
        let state = lab_queued(Topology::ViaRouter, &["100mbit"], &["200ms", "1:a=5ms"]);
        let env = LabEnv::parse("demo", &client_env(&state, "a").to_json()).unwrap();
        let b = state.links[1].end_of("b").unwrap().address;
        let path = env.path_to(b.into()).unwrap();
        assert!((path.toward_peer.queue_seconds.unwrap() - 0.2).abs() < 1e-9, "{path:?}");
        assert!((path.toward_me.queue_seconds.unwrap() - 0.005).abs() < 1e-9, "{path:?}");
    }

    #[test]
    fn a_direct_lab_and_the_router_itself_have_no_router_path() {
        let direct = lab(Topology::Direct, &["100mbit"]);
        let env = LabEnv::parse("demo", &client_env(&direct, "a").to_json()).unwrap();
        let b = direct.links[0].end_of("b").unwrap().address;
        assert_eq!(env.path_to(b.into()), None);
        let routed = lab(Topology::ViaRouter, &["100mbit"]);
        let env = LabEnv::parse("demo", &client_env(&routed, "r").to_json()).unwrap();
        let b = routed.links[1].end_of("b").unwrap().address;
        assert_eq!(env.path_to(b.into()), None);
        let [(lab_var, name), (paths_var, _)] = client_vars(&routed, "a");
        assert_eq!((lab_var, paths_var, name.as_str()), (LAB_VAR, PATHS_VAR, "demo"));
    }
}
