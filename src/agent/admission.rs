//! Who may run a test now: at most `max_concurrent` tests at once, and a
//! bounded first-come-first-served queue for clients that asked to wait
//! (`nicbench tcp --wait 60s`). A newcomer never jumps the queue; a test
//! slot goes to the head of the line only. Each running test counts the
//! other tests that overlapped it, so its result can say so. A test with
//! no fixed duration (a byte count, a sweep) has its end estimated from its
//! pace so far when it reports one, else a busy answer says how long it has
//! been running instead of promising an end.
//!
//! A slot is held at most until its test's time plus [`SLOT_GRACE`] has
//! passed (a test without a fixed time: the longest test the agent allows,
//! `--max-duration`), whatever its holder does: a client that stops
//! reading cannot keep others waiting, and a busy answer never promises an
//! end later than that.
//!
//! No I/O: the agent's connection threads call in, and tests drive it from
//! plain threads.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long past its test's time a slot stays held at most: time for a
/// receiver to drain and both sides to report, not for a stalled client.
pub const SLOT_GRACE: Duration = Duration::from_secs(5);

/// The longest test assumed when the agent does not say
/// ([`Admission::longest_test`]): `--max-duration`'s default.
const DEFAULT_LONGEST: Duration = Duration::from_secs(3600);

/// The test slots and the queue.
pub struct Admission {
    max_concurrent: usize,
    max_queue: usize,
    /// The longest test allowed: what bounds a slot whose test has no
    /// fixed time.
    longest: Duration,
    /// How long past its test's time a slot is held: [`SLOT_GRACE`], but
    /// in tests.
    grace: Duration,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    next_id: u64,
    running: Vec<Running>,
    queue: VecDeque<Waiting>,
}

struct Running {
    id: u64,
    /// Expected end, for `busy` and queue estimates; None when the test
    /// has no fixed duration.
    until: Option<Instant>,
    started: Instant,
    /// How far a test without a fixed duration has got.
    pace: Option<Arc<Pace>>,
    /// Other tests that ran during part of this one.
    overlapped: u32,
    /// When the slot is freed whatever its holder does.
    expires: Instant,
}

impl Running {
    /// When it should end, if that can be said: its fixed end (once that
    /// has passed, its expiry: it ends by then at the latest), else the
    /// pace so far carried to the end of its work, never past its expiry.
    /// Otherwise None.
    fn expected_end(&self, now: Instant) -> Option<Instant> {
        if let Some(until) = self.until {
            return Some(if until <= now { self.expires } else { until });
        }
        let pace = self.pace.as_ref()?;
        let done = pace.done.load(Ordering::Relaxed);
        if done == 0 {
            return None;
        }
        let left = pace.total.saturating_sub(done) as f64 / done as f64;
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        Some((now + Duration::from_secs_f64((elapsed * left).min(1e6))).min(self.expires))
    }
}

/// Progress of a test that ends after an amount of work, not a time: the
/// side adds what it moved, the admission divides.
#[derive(Debug)]
pub struct Pace {
    done: AtomicU64,
    total: u64,
}

impl Pace {
    /// Work of `total` units (bytes) in all.
    pub fn new(total: u64) -> Arc<Pace> {
        Arc::new(Pace {
            done: AtomicU64::new(0),
            total,
        })
    }

    pub fn add(&self, units: u64) {
        self.done.fetch_add(units, Ordering::Relaxed);
    }
}

struct Waiting {
    id: u64,
    expected: Duration,
}

/// Refusal to run now: a slot frees in about `seconds_left`, or, when the
/// test holding it has no known end, `running_seconds` says how long that
/// test has been running (and `seconds_left` counts it as ending now).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Busy {
    pub seconds_left: f64,
    pub running_seconds: Option<f64>,
}

/// The queue already holds `max_queue` clients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueFull {
    pub max_queue: usize,
}

/// A running test's slot; freed when dropped, however the test ends.
pub struct Ticket<'a> {
    admission: &'a Admission,
    id: u64,
}

/// A place in the queue; left when dropped (the client gave up or vanished).
pub struct Place<'a> {
    admission: &'a Admission,
    id: u64,
    expected: Duration,
}

/// Result of waiting in the queue for a while.
pub enum Poll<'a> {
    Granted(Ticket<'a>),
    /// Still waiting: `position` 1 is next in line.
    Waiting {
        position: u32,
        seconds_left: f64,
    },
}

impl Admission {
    pub fn new(max_concurrent: usize, max_queue: usize) -> Admission {
        Admission {
            max_concurrent: max_concurrent.max(1),
            max_queue,
            longest: DEFAULT_LONGEST,
            grace: SLOT_GRACE,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    /// Sets the longest test the agent allows (`--max-duration`): a slot
    /// whose test has no fixed time is freed after it and the grace.
    pub fn longest_test(mut self, longest: Duration) -> Admission {
        self.longest = longest;
        self
    }

    /// The state, with every slot past its expiry freed.
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not stop the agent: the state stays usable.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let before = state.running.len();
        state.running.retain(|r| r.expires > now);
        if state.running.len() < before {
            self.changed.notify_all();
        }
        state
    }

    /// A slot now, if one is free and nobody waits in line.
    pub fn try_enter(&self, expected: Duration) -> Result<Ticket<'_>, Busy> {
        let mut state = self.lock();
        if state.queue.is_empty() && state.running.len() < self.max_concurrent {
            return Ok(self.grant(&mut state, expected));
        }
        let (seconds_left, running_seconds) = self.start_estimate(&state, state.queue.len());
        Err(Busy {
            seconds_left,
            running_seconds,
        })
    }

    /// Joins the end of the queue.
    pub fn enqueue(&self, expected: Duration) -> Result<Place<'_>, QueueFull> {
        let mut state = self.lock();
        if state.queue.len() >= self.max_queue {
            return Err(QueueFull {
                max_queue: self.max_queue,
            });
        }
        state.next_id += 1;
        let id = state.next_id;
        state.queue.push_back(Waiting { id, expected });
        Ok(Place {
            admission: self,
            id,
            expected,
        })
    }

    /// Waits up to `patience` for `place` to reach a free slot.
    pub fn poll<'a>(&'a self, place: &Place<'a>, patience: Duration) -> Poll<'a> {
        let deadline = Instant::now() + patience;
        let mut state = self.lock();
        loop {
            let position = state.queue.iter().position(|w| w.id == place.id);
            if position == Some(0) && state.running.len() < self.max_concurrent {
                state.queue.pop_front();
                let ticket = self.grant(&mut state, place.expected);
                // The next in line may now be at the head with a free slot.
                self.changed.notify_all();
                return Poll::Granted(ticket);
            }
            let now = Instant::now();
            let position = position.unwrap_or(state.queue.len());
            if now >= deadline {
                return Poll::Waiting {
                    position: position as u32 + 1,
                    seconds_left: self.start_estimate(&state, position).0,
                };
            }
            // A slot that expires frees without a ticket dropped: wake then.
            let wake = state.running.iter().map(|r| r.expires).fold(deadline, Instant::min);
            drop(
                self.changed
                    .wait_timeout(state, wake.saturating_duration_since(now))
                    .unwrap_or_else(|p| p.into_inner())
                    .0,
            );
            state = self.lock();
        }
    }

    fn grant(&self, state: &mut State, expected: Duration) -> Ticket<'_> {
        state.next_id += 1;
        let id = state.next_id;
        let others = state.running.len() as u32;
        for r in state.running.iter_mut() {
            r.overlapped += 1;
        }
        let now = Instant::now();
        state.running.push(Running {
            id,
            until: Some(now + expected),
            started: now,
            pace: None,
            overlapped: others,
            // Until the holder says when its test starts, the longest
            // test it could run bounds the slot.
            expires: now + expected.max(self.longest) + self.grace,
        });
        Ticket { admission: self, id }
    }

    /// Seconds until the client behind `ahead` waiting ones gets a slot,
    /// assuming every test lasts as long as it asked (or its pace says);
    /// and when that slot is held by a test with no known end, how long
    /// that test has been running (it then counts as ending now).
    fn start_estimate(&self, state: &State, ahead: usize) -> (f64, Option<f64>) {
        let now = Instant::now();
        let mut free_at: BinaryHeap<Reverse<(Instant, Option<Duration>)>> = state
            .running
            .iter()
            .map(|r| match r.expected_end(now) {
                Some(end) => Reverse((end, None)),
                None => Reverse((now, Some(now.saturating_duration_since(r.started)))),
            })
            .collect();
        while free_at.len() < self.max_concurrent {
            free_at.push(Reverse((now, None)));
        }
        for waiting in state.queue.iter().take(ahead) {
            let Reverse((t, unknown)) = free_at.pop().expect("at least one slot");
            free_at.push(Reverse((t.max(now) + waiting.expected, unknown)));
        }
        let Reverse((start, unknown)) = free_at.pop().expect("at least one slot");
        (
            start.saturating_duration_since(now).as_secs_f64(),
            unknown.map(|d| d.as_secs_f64()),
        )
    }

    /// Sets the grace past a test's time ([`SLOT_GRACE`] otherwise).
    #[cfg(test)]
    fn with_grace(mut self, grace: Duration) -> Admission {
        self.grace = grace;
        self
    }

    /// Tests running now.
    pub fn running(&self) -> usize {
        self.lock().running.len()
    }

    /// Clients waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().queue.len()
    }
}

impl Ticket<'_> {
    /// The test really starts now and should end `expected` later; None
    /// when it has no fixed duration, with its `pace` when it reports one.
    /// The slot is then freed at that end (or, without one, after the
    /// longest test allowed) plus [`SLOT_GRACE`], whatever happens.
    pub fn started(&self, expected: Option<Duration>, pace: Option<Arc<Pace>>) {
        let (longest, grace) = (self.admission.longest, self.admission.grace);
        let mut state = self.admission.lock();
        if let Some(r) = state.running.iter_mut().find(|r| r.id == self.id) {
            let now = Instant::now();
            r.started = now;
            r.until = expected.map(|e| now + e);
            r.pace = pace;
            r.expires = now + expected.unwrap_or(longest) + grace;
        }
    }

    /// True once the slot was freed for running past its time and grace:
    /// its holder should stop.
    pub fn expired(&self) -> bool {
        !self.admission.lock().running.iter().any(|r| r.id == self.id)
    }

    /// Other tests that ran during part of this one, so far.
    pub fn overlapped(&self) -> u32 {
        let state = self.admission.lock();
        state
            .running
            .iter()
            .find(|r| r.id == self.id)
            .map_or(0, |r| r.overlapped)
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut state = self.admission.lock();
        state.running.retain(|r| r.id != self.id);
        self.admission.changed.notify_all();
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut state = self.admission.lock();
        state.queue.retain(|w| w.id != self.id);
        self.admission.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN: Duration = Duration::from_secs(10);

    #[test]
    fn one_slot_by_default_and_busy_names_the_time_left() {
        let admission = Admission::new(1, 4);
        let ticket = admission.try_enter(TEN).ok().unwrap();
        let before = ticket_age(&admission);
        let busy = admission.try_enter(TEN).err().unwrap();
        let after = ticket_age(&admission);
        // What is left of the 10 s, by the admission's own clock.
        assert_between(busy.seconds_left, 10.0 - after, 10.0 - before);
        drop(ticket);
        assert!(admission.try_enter(TEN).is_ok());
    }

    #[test]
    fn the_queue_is_first_come_first_served_and_bounded() {
        let admission = Admission::new(1, 2);
        let ticket = admission.try_enter(TEN).ok().unwrap();
        let first = admission.enqueue(TEN).ok().unwrap();
        let second = admission.enqueue(TEN).ok().unwrap();
        assert_eq!(admission.enqueue(TEN).err().unwrap(), QueueFull { max_queue: 2 });
        // A newcomer may not jump the line even when a slot is free.
        drop(ticket);
        assert!(admission.try_enter(TEN).is_err());
        match admission.poll(&second, Duration::from_millis(10)) {
            Poll::Waiting { position, seconds_left } => {
                assert_eq!(position, 2);
                assert_eq!(seconds_left, 10.0, "one test of 10 s ahead, none running");
            }
            Poll::Granted(_) => panic!("the second in line was served first"),
        }
        let first_ticket = match admission.poll(&first, Duration::from_millis(10)) {
            Poll::Granted(t) => t,
            Poll::Waiting { .. } => panic!("the head of the line was not served"),
        };
        drop(first);
        match admission.poll(&second, Duration::from_millis(10)) {
            Poll::Waiting { position, .. } => assert_eq!(position, 1),
            Poll::Granted(_) => panic!("two tests in one slot"),
        }
        drop(first_ticket);
        assert!(matches!(admission.poll(&second, TEN), Poll::Granted(_)));
    }

    #[test]
    fn a_client_that_leaves_the_queue_frees_its_place() {
        let admission = Admission::new(1, 1);
        let _ticket = admission.try_enter(TEN).ok().unwrap();
        let place = admission.enqueue(TEN).ok().unwrap();
        assert_eq!(admission.waiting(), 1);
        drop(place);
        assert_eq!(admission.waiting(), 0);
        assert!(admission.enqueue(TEN).is_ok());
    }

    #[test]
    fn a_waiter_is_woken_when_the_slot_frees() {
        let admission = Admission::new(1, 1);
        let ticket = admission.try_enter(TEN).ok().unwrap();
        let place = admission.enqueue(TEN).ok().unwrap();
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            let (admission, place) = (&admission, &place);
            let waiter = scope.spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                matches!(admission.poll(place, Duration::from_secs(30)), Poll::Granted(_))
            });
            let tid = rx.recv().unwrap();
            // The slot frees once the waiter sleeps inside poll: a state
            // of its thread, not a time.
            wait_until_sleeping(tid);
            drop(ticket);
            assert!(waiter.join().unwrap(), "the freed slot went to the waiter");
        });
    }

    /// Returns when thread `tid` of this process sleeps (state S in its
    /// /proc stat: here, waiting on the admission's condition variable);
    /// fails after 30 s.
    fn wait_until_sleeping(tid: libc::pid_t) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let stat = format!("/proc/self/task/{tid}/stat");
        loop {
            let text = std::fs::read_to_string(&stat).unwrap_or_default();
            let state = text.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').next());
            if state == Some("S") {
                return;
            }
            assert!(Instant::now() < deadline, "thread {tid} never slept: {text}");
            std::thread::yield_now();
        }
    }

    /// `value` lies in `low..=high` (a microsecond's rounding allowed).
    fn assert_between(value: f64, low: f64, high: f64) {
        assert!(
            low - 1e-6 <= value && value <= high + 1e-6,
            "{value} not in {low}..={high}"
        );
    }

    #[test]
    fn a_test_without_a_fixed_end_is_estimated_from_its_pace_or_said_to_be_running() {
        let admission = Admission::new(1, 1);
        let ticket = admission.try_enter(TEN).ok().unwrap();
        let pace = Pace::new(1000);
        ticket.started(None, Some(Arc::clone(&pace)));
        // No pace yet: no end is promised, only how long it has run, as
        // the ticket's own clock says before and after asking.
        let before = ticket_age(&admission);
        let busy = admission.try_enter(TEN).err().unwrap();
        let after = ticket_age(&admission);
        assert_eq!(busy.seconds_left, 0.0);
        assert_between(busy.running_seconds.unwrap(), before, after);
        // A quarter done: three times as long again as it has run.
        pace.add(250);
        let before = ticket_age(&admission);
        let busy = admission.try_enter(TEN).err().unwrap();
        let after = ticket_age(&admission);
        assert_eq!(busy.running_seconds, None);
        assert_between(busy.seconds_left, 3.0 * before, 3.0 * after);
        // Done: ends now.
        pace.add(750);
        assert_eq!(admission.try_enter(TEN).err().unwrap().seconds_left, 0.0);
        // A fixed duration is what the test asked, from when it started.
        ticket.started(Some(TEN), None);
        let before = ticket_age(&admission);
        let busy = admission.try_enter(TEN).err().unwrap();
        let after = ticket_age(&admission);
        assert_eq!(busy.running_seconds, None);
        assert_between(busy.seconds_left, 10.0 - after, 10.0 - before);
    }

    #[test]
    fn a_slot_is_freed_at_its_time_and_grace_whatever_its_holder_does() {
        let admission = Admission::new(1, 1).with_grace(Duration::ZERO);
        let stalled = admission.try_enter(TEN).ok().unwrap();
        assert!(!stalled.expired());
        // A test of no time and no grace: over as soon as it started. Its
        // holder never lets go of the ticket (a client that reads nothing).
        stalled.started(Some(Duration::ZERO), None);
        let next = admission.try_enter(TEN).expect("the stalled slot was not freed");
        assert!(stalled.expired(), "the holder is told its slot is gone");
        // The stalled ticket's late drop does not free the new test's slot.
        drop(stalled);
        assert!(admission.try_enter(TEN).is_err());
        assert!(!next.expired());
    }

    #[test]
    fn a_test_past_its_time_is_said_to_end_by_its_grace() {
        let grace = Duration::from_secs(60);
        let admission = Admission::new(1, 1).with_grace(grace);
        let overrun = admission.try_enter(TEN).ok().unwrap();
        overrun.started(Some(Duration::ZERO), None);
        // Its time is up but the slot is held: not "about 0 s more", but
        // when it is freed at the latest.
        let before = ticket_age(&admission);
        let busy = admission.try_enter(TEN).err().unwrap();
        let after = ticket_age(&admission);
        assert_eq!(busy.running_seconds, None);
        assert_between(busy.seconds_left, 60.0 - after, 60.0 - before);
    }

    #[test]
    fn a_slot_without_a_fixed_time_is_bounded_by_the_longest_test() {
        let admission = Admission::new(1, 1)
            .longest_test(Duration::ZERO)
            .with_grace(Duration::ZERO);
        let ticket = admission.try_enter(TEN).ok().unwrap();
        assert!(!ticket.expired());
        ticket.started(None, Some(Pace::new(1000)));
        assert!(
            ticket.expired(),
            "a byte-count test holds its slot no longer than --max-duration allows"
        );
        assert!(admission.try_enter(TEN).is_ok());
    }

    /// Seconds since the only running test started.
    fn ticket_age(admission: &Admission) -> f64 {
        admission.lock().running[0].started.elapsed().as_secs_f64()
    }

    #[test]
    fn concurrent_tests_count_each_other() {
        let admission = Admission::new(2, 0);
        let a = admission.try_enter(TEN).ok().unwrap();
        assert_eq!(a.overlapped(), 0);
        let b = admission.try_enter(TEN).ok().unwrap();
        assert!(admission.try_enter(TEN).is_err());
        drop(b);
        let c = admission.try_enter(TEN).ok().unwrap();
        assert_eq!(a.overlapped(), 2, "b and then c overlapped a");
        assert_eq!(c.overlapped(), 1);
        assert_eq!(admission.running(), 2);
    }
}
