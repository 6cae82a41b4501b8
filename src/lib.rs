//! nicbench: a network benchmark suite. See DESIGN.md for the map.
//!
//! Layers, top to bottom: `cli` and `cmd` (the command line), `session`
//! (client side of a test) and `agent` (`nicbench serve`), `trial` (one
//! side of one trial), `workload` (traffic engines behind one trait),
//! `probe` (CPU, TCP_INFO, host facts), `protocol` (control messages),
//! `model` (result types), `report` (renderers), `units`, `lab`.

pub mod address;
pub mod agent;
pub mod cli;
pub mod cmd;
pub mod iperf3;
pub mod lab;
pub mod linerate;
pub mod links;
pub mod logging;
pub mod mesh;
pub mod metrics;
pub mod model;
pub mod plan;
pub mod probe;
pub mod protocol;
pub mod repeat;
pub mod report;
pub mod session;
pub mod shell;
pub mod stats;
pub mod store;
pub mod trial;
pub mod units;
pub mod verdict;
pub mod workload;
