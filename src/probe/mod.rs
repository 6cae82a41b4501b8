//! What is measured around a workload: CPU time (system-wide from
//! /proc/stat, and the benchmark's own threads from getrusage), TCP_INFO of
//! each stream, and facts about the host.
//!
//! Samplers sit behind small traits so tests drive them with fixtures.

pub mod cpu;
pub mod host;
pub mod tcpinfo;
