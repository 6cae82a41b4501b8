//! `nicbench mesh`: every ordered pair of many agents, measured by the
//! agents themselves (peer tests), scheduled in rounds of disjoint pairs,
//! shown as an N x N matrix with its outliers named; the hosts come from
//! the command line, a hosts file (plain, kubectl, Ansible) or DNS.

pub mod hosts;
pub mod matrix;
pub mod outliers;
pub mod schedule;
pub mod stored;
