//! A stream over several paths (MPTCP): each path, a sender address and a
//! receiver address with every subflow between them, what it carried, and
//! what its link could carry; summed, the multipath stream's line rate.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The paths of a trial's MPTCP streams and their sum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathsSummary {
    pub paths: Vec<PathFigures>,
    /// What all the paths carried: the streams' receiver rate.
    pub measured_bits_per_second: f64,
    /// Sum of the paths' goodputs; None unless every path's link is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theoretical_goodput_bits_per_second: Option<f64>,
    /// `measured_bits_per_second` as a share of that sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_of_theoretical_goodput: Option<f64>,
}

/// One path: its subflows' data and its link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathFigures {
    /// The sender's address and the receiver's.
    pub from: IpAddr,
    pub to: IpAddr,
    /// Its part of the streams' receiver rate.
    pub bits_per_second: f64,
    /// Its part of the data all the paths carried.
    pub share_percent: f64,
    /// The slowest of the ends' tbf rates and real link speeds and of a
    /// lab router's tbf toward the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_bits_per_second: Option<u64>,
    /// Where that rate came from: `nic`, `qdisc` (a tbf on an end) or
    /// `lab` (the lab router's tbf, named in `shaper_name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_speed_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_name: Option<String>,
    /// What the link carries of TCP payload at the subflow's MSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_bits_per_second: Option<f64>,
}

impl PathFigures {
    /// The path's rate as a share of its goodput.
    pub fn percent_of_goodput(&self) -> Option<f64> {
        self.goodput_bits_per_second
            .filter(|g| *g > 0.0)
            .map(|g| self.bits_per_second * 100.0 / g)
    }
}
