//! The agent's limits on connections (`nicbench serve
//! --max-connections-per-minute`, `--max-connections-per-address`, and each
//! port's fair slots, `protocol::slots`): the
//! gate lives in `protocol::gate`, where the metrics server reaches it too;
//! what one test may ask for is `protocol::limits`, shared with the iperf3
//! server.

pub use crate::protocol::gate::{ConnectionGate, ConnectionRate, GateRefusal, Pass};
pub use crate::protocol::slots::{Slot, SlotTable};
