//! The agent's check of a test over several links (`--links`): the
//! workload must run over links, and every agent address of the spec's
//! links must be an address of this host.

use std::net::IpAddr;

use crate::workload::{SpecError, TestSpec, Workload};

/// Checks that the workload can run over links and that every agent
/// address of the spec's links is an address of this host.
pub(super) fn check_links_here(spec: &TestSpec, workload: &dyn Workload) -> Result<(), SpecError> {
    if spec.links.is_empty() {
        return Ok(());
    }
    let here: Vec<IpAddr> = crate::probe::nic::interface_addresses()
        .into_iter()
        .map(|(_, address)| address)
        .collect();
    check_links_among(spec, workload.supports_links(), &here, &crate::probe::host::hostname())
}

/// [`check_links_here`] with this host's addresses and name in hand.
fn check_links_among(spec: &TestSpec, supports_links: bool, here: &[IpAddr], hostname: &str) -> Result<(), SpecError> {
    if spec.links.is_empty() {
        return Ok(());
    }
    if !supports_links {
        return Err(SpecError::Invalid(format!(
            "the {} workload does not run over several links (--links)",
            spec.workload
        )));
    }
    for link in &spec.links {
        if !here.iter().any(|a| a.to_canonical() == link.agent.to_canonical()) {
            return Err(SpecError::Invalid(format!(
                "--links: {} is not an address of the agent's host {hostname}; ask it with `nicbench host --remote` \
                 or use --links auto",
                link.agent
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;
    use crate::model::LinkPair;

    fn over(pairs: &[(&str, &str)]) -> TestSpec {
        let mut s = spec("tcp");
        s.links = pairs
            .iter()
            .map(|(client, agent)| LinkPair {
                client: client.parse().unwrap(),
                agent: agent.parse().unwrap(),
            })
            .collect();
        s
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn a_test_without_links_needs_nothing() {
        assert!(check_links_among(&spec("rr"), false, &[], "h").is_ok());
    }

    #[test]
    fn every_agent_address_must_be_here() {
        let here = ips(&["10.0.0.2", "10.0.1.2", "fd00::2"]);
        let two = over(&[("10.0.0.1", "10.0.0.2"), ("10.0.1.1", "10.0.1.2")]);
        assert!(check_links_among(&two, true, &here, "h").is_ok());
        let elsewhere = over(&[("10.0.0.1", "10.0.0.2"), ("10.0.9.1", "10.0.9.2")]);
        let e = check_links_among(&elsewhere, true, &here, "far").unwrap_err();
        assert!(
            e.to_string()
                .contains("10.0.9.2 is not an address of the agent's host far"),
            "{e}"
        );
    }

    #[test]
    fn a_mapped_v4_address_is_the_same_address() {
        let here = ips(&["::ffff:10.0.0.2"]);
        assert!(check_links_among(&over(&[("10.0.0.1", "10.0.0.2")]), true, &here, "h").is_ok());
    }

    #[test]
    fn a_workload_without_links_is_refused_over_links() {
        let mut s = over(&[("10.0.0.1", "10.0.0.2")]);
        s.workload = "sweep".into();
        let e = check_links_among(&s, false, &ips(&["10.0.0.2"]), "h").unwrap_err();
        assert!(
            e.to_string()
                .contains("the sweep workload does not run over several links"),
            "{e}"
        );
    }
}
