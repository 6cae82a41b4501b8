//! `nicbench host`: facts of this machine and its interfaces, or of an
//! agent (`--remote`), which answers a `facts_request` with its host facts
//! and the interface toward this client.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

use crate::cli::HostArgs;
use crate::model::{HostFacts, NicFacts};
use crate::probe::{host, nic};
use crate::report::facts::{write_host, write_nic};
use crate::session::{self, Target};

/// What `nicbench host --json` prints: the host facts (with `interface`
/// when one was selected) and, locally without a selection, every interface.
#[derive(Debug, Serialize)]
pub struct HostReport {
    #[serde(flatten)]
    pub facts: HostFacts,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<NicFacts>,
}

pub fn run(args: HostArgs) -> anyhow::Result<()> {
    let report = match &args.remote {
        Some(remote) => {
            let (host, port) = super::address::agent_address(remote, args.port, None)?;
            let shown = super::address::display(&host, port);
            HostReport {
                facts: session::remote_facts(&Target {
                    host,
                    port,
                    family: None,
                    bind: None,
                    connect_timeout: args.connect_timeout,
                    wait: Duration::ZERO,
                    psk_file: args.psk_file.clone(),
                })
                .with_context(|| format!("asking the agent at {shown} for its facts"))?,
                interfaces: vec![],
            }
        }
        None => local_report(&args)?,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = if args.json {
        crate::outside_text::write_json_pretty(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out))
    } else {
        write_text(&report, &mut out)
    };
    super::stdout::closed_pipe_is_the_end(written.and_then(|_| out.flush()), "writing the facts")
}

fn local_report(args: &HostArgs) -> anyhow::Result<HostReport> {
    let mut facts = host::local_facts();
    if let Some(name) = &args.interface {
        if !nic::interface_names().contains(name) {
            bail!(
                "--interface {name}: no such interface here; these exist: {}",
                nic::interface_names().join(", ")
            );
        }
        facts.interface = Some(nic::nic_facts(name, None));
        return Ok(HostReport {
            facts,
            interfaces: vec![],
        });
    }
    if let Some(peer) = args.peer {
        let local = nic::local_address_toward(peer)
            .with_context(|| format!("--peer {peer}: no route to that address from this host"))?;
        facts.interface = Some(
            nic::facts_for_address(local)
                .with_context(|| format!("--peer {peer}: no interface holds the local address {local}"))?,
        );
        return Ok(HostReport {
            facts,
            interfaces: vec![],
        });
    }
    let interfaces = nic::interface_names()
        .iter()
        .map(|name| {
            let address = nic::interface_addresses()
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, a)| a);
            nic::nic_facts(name, address)
        })
        .collect();
    Ok(HostReport { facts, interfaces })
}

fn write_text(report: &HostReport, out: &mut dyn Write) -> std::io::Result<()> {
    write_host(&report.facts, out)?;
    for nic in report.facts.interface.iter().chain(&report.interfaces) {
        writeln!(out)?;
        write_nic(nic, out)?;
    }
    Ok(())
}
