//! What is measured around a workload: CPU time (system-wide from
//! /proc/stat, and the benchmark's own threads from getrusage), TCP_INFO of
//! each stream, NIC/interrupt/protocol counters, and facts about the host
//! and the interface toward the peer.
//!
//! Samplers sit behind small traits so tests drive them with fixtures.

pub mod bonding;
pub mod cgroup;
pub mod cipher;
pub mod counters;
pub mod cpu;
pub mod ethtool;
pub mod host;
pub mod mptcp;
pub mod mtu;
pub mod netns;
pub mod nic;
pub mod path_mtu;
pub mod qdisc;
pub mod sched;
pub mod settings;
pub mod tcpinfo;
