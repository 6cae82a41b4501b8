//! Starting things at a fixed interval: the loaded workload's probes and
//! samplers, and `rr --every`'s transactions. A slot missed (the last
//! transaction took longer than the interval) is skipped, not made up in a
//! burst: the next start is one interval after now.

use std::time::{Duration, Instant};

/// Longest single sleep, so that a stop is seen within it.
const SLICE: Duration = Duration::from_millis(50);

/// Sleeps until `next` while `running()` holds, then moves `next` one
/// `interval` on (to now + `interval` when it fell behind). False when
/// `running()` turned false first.
pub fn wait_for_slot(next: &mut Instant, interval: Duration, running: impl Fn() -> bool) -> bool {
    while running() {
        let now = Instant::now();
        if now >= *next {
            *next += interval;
            if *next < now {
                *next = now + interval;
            }
            return true;
        }
        std::thread::sleep((*next - now).min(SLICE));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn slots_are_an_interval_apart_and_a_missed_one_is_skipped() {
        let interval = Duration::from_millis(5);
        let start = Instant::now();
        let mut next = start;
        assert!(wait_for_slot(&mut next, interval, || true));
        assert_eq!(next, start + interval);
        assert!(wait_for_slot(&mut next, interval, || true));
        assert!(Instant::now() >= start + interval, "the second slot was waited for");
        assert_eq!(next, start + 2 * interval);
        // Fall three intervals behind: the next slot is now + one interval.
        std::thread::sleep(3 * interval);
        let before = Instant::now();
        assert!(wait_for_slot(&mut next, interval, || true));
        assert!(next >= before + interval, "no burst to catch up");
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let calls = Cell::new(0);
        let mut next = Instant::now() + Duration::from_secs(3600);
        let began = Instant::now();
        assert!(!wait_for_slot(&mut next, Duration::from_secs(1), || {
            calls.set(calls.get() + 1);
            calls.get() < 3
        }));
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "the stop was seen within a slice"
        );
    }
}
