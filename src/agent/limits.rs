//! The agent's limit on control connections per client address
//! (`nicbench serve --max-connections-per-minute`); what one test may ask
//! for is `protocol::limits`, shared with the iperf3 server.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Addresses tracked at most; past that, the oldest are forgotten (the
/// limit is against one noisy client, not a distributed flood).
const MAX_TRACKED_ADDRESSES: usize = 16_384;
const WINDOW: Duration = Duration::from_secs(60);

/// Control connections per client address in the last minute.
#[derive(Debug)]
pub struct ConnectionRate {
    per_minute: u32,
    seen: HashMap<IpAddr, VecDeque<Instant>>,
}

impl ConnectionRate {
    /// `per_minute` 0 means no limit.
    pub fn new(per_minute: u32) -> ConnectionRate {
        ConnectionRate {
            per_minute,
            seen: HashMap::new(),
        }
    }

    /// Records a connection from `ip` at `now`; Err(seconds until the
    /// address may connect again) when it is over the limit.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> Result<(), f64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        if self.seen.len() >= MAX_TRACKED_ADDRESSES {
            self.seen
                .retain(|_, times| times.back().is_some_and(|t| now.duration_since(*t) < WINDOW));
            if self.seen.len() >= MAX_TRACKED_ADDRESSES {
                self.seen.clear();
            }
        }
        let times = self.seen.entry(ip).or_default();
        while times.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            times.pop_front();
        }
        if times.len() >= self.per_minute as usize {
            let oldest = *times.front().expect("over a non-zero limit");
            return Err((WINDOW - now.duration_since(oldest)).as_secs_f64());
        }
        times.push_back(now);
        Ok(())
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_per_minute_are_counted_per_address() {
        let mut rate = ConnectionRate::new(2);
        let now = Instant::now();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(rate.admit(a, now).is_ok());
        assert!(rate.admit(a, now + Duration::from_secs(1)).is_ok());
        let wait = rate.admit(a, now + Duration::from_secs(2)).unwrap_err();
        assert!((57.0..=58.0).contains(&wait), "{wait}");
        assert!(rate.admit(b, now + Duration::from_secs(2)).is_ok());
        assert!(rate.admit(a, now + Duration::from_secs(61)).is_ok());
        assert!(ConnectionRate::new(0).admit(a, now).is_ok());
    }
}
