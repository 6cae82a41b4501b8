//! The stream runner every stream workload shares: one OS thread per stream
//! end, a per-thread byte counter the hot loop stores into, and one
//! coordinating thread that samples the counters at each interval, marks
//! the end of the warm-up, and raises the stop flag when the time is up.
//! The hot loops never read the clock, lock, log or allocate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use crate::model::{Extras, Interval, ProcessCpu, Role, SocketBuffers, StreamEnd, TcpInfo};
use crate::probe::cpu::thread_cpu;
use crate::units::bits_per_second;

/// Most interval samples recorded per side (streams x intervals); past it
/// no more are kept (live output still works), so that a report always
/// fits in one control frame.
pub const MAX_RECORDED_INTERVALS: u64 = 20_000;

/// Called at every interval with a side's per-stream counts (live output).
pub type IntervalCallback = Box<dyn Fn(&IntervalTick) + Send + Sync>;

/// The work of one stream end, run on its own thread.
pub type StreamBody = Box<dyn FnOnce(&StreamContext) -> TaskEnd + Send>;

/// How a side's run is steered.
pub struct RunControl {
    /// Raised when senders must stop (time up, `stop` from the peer, Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// The moment the test started on this side.
    pub start: Instant,
    pub omit: Duration,
    /// Sending time after the warm-up; None when a byte count ends the test.
    pub duration: Option<Duration>,
    pub interval: Duration,
    /// Cores for the stream threads, round-robin.
    pub cpus: Vec<u32>,
    /// Called at every interval with this side's per-stream counts.
    pub on_interval: Option<IntervalCallback>,
    /// Called when a workload finishes a step of a known number (a sweep point).
    pub on_progress: Option<ProgressCallback>,
}

/// Called by a workload after each step of its work, for live display;
/// shared with the stream thread that does the steps.
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// A step of a workload that runs a known number of steps.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Steps done, and in all.
    pub done: u64,
    pub total: u64,
    /// One line describing the step just done, units included.
    pub message: String,
}

/// What a side measured in one interval, for live display.
#[derive(Debug, Clone)]
pub struct IntervalTick {
    pub start_seconds: f64,
    pub end_seconds: f64,
    pub omitted: bool,
    /// (stream id, role, bytes in this interval)
    pub streams: Vec<(u32, Role, u64)>,
}

/// Everything one side measured.
#[derive(Debug, Clone, Default)]
pub struct SideOutcome {
    pub streams: Vec<StreamEnd>,
    /// CPU time of the stream threads.
    pub process: ProcessCpu,
    /// Transactions this side completed or answered, warm-up included
    /// (request/response workloads): service demand per transaction.
    pub transactions: u64,
}

/// What a stream body sees: the counter to store its running byte total
/// into, the stop flag, and for bodies that end on their own (a sweep) the
/// moment the runner will raise the flag and the progress callback.
pub struct StreamContext<'a> {
    pub bytes: &'a AtomicU64,
    pub stop: &'a AtomicBool,
    /// When the runner raises `stop` (end of warm-up plus duration), if a
    /// duration is set.
    pub deadline: Option<Instant>,
    pub progress: Option<&'a ProgressCallback>,
}

/// What a stream body reports when it ends.
#[derive(Debug, Default)]
pub struct TaskEnd {
    pub tcp_info: Option<TcpInfo>,
    /// Buffer sizes at the end (autotuning may have grown them); the sizes
    /// read at setup are reported when None.
    pub socket: Option<SocketBuffers>,
    pub error: Option<String>,
    /// The workload's own counts of this end, under its key.
    pub extras: Extras,
    /// When the end's last useful work happened, if not when the body
    /// returned (a receiver that waits for stragglers, a responder that
    /// waits for requests that never come): its time and rate end there.
    pub last_activity: Option<Instant>,
}

/// One stream end to run on its own thread.
pub struct StreamTask {
    pub stream_id: u32,
    pub role: Role,
    pub socket: SocketBuffers,
    pub body: StreamBody,
}

/// A counter on its own cache lines, so streams do not share one.
#[repr(align(128))]
#[derive(Default)]
struct PaddedCounter(AtomicU64);

struct Finished {
    index: usize,
    at: Instant,
    end: TaskEnd,
    cpu: ProcessCpu,
}

/// Pins the calling thread to one core; failures are ignored (reported by
/// validation beforehand).
pub fn pin_current_thread(core: u32) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs every task to its end and collects the stream ends.
pub fn run_streams(tasks: Vec<StreamTask>, control: &RunControl) -> SideOutcome {
    let counters: Arc<Vec<PaddedCounter>> = Arc::new(tasks.iter().map(|_| PaddedCounter::default()).collect());
    let (done_tx, done_rx) = mpsc::channel::<Finished>();
    let mut meta = Vec::with_capacity(tasks.len());
    let mut handles = Vec::with_capacity(tasks.len());
    for (index, task) in tasks.into_iter().enumerate() {
        meta.push((task.stream_id, task.role, task.socket));
        let counters = Arc::clone(&counters);
        let stop = Arc::clone(&control.stop);
        let done = done_tx.clone();
        let core = (!control.cpus.is_empty()).then(|| control.cpus[index % control.cpus.len()]);
        let body = task.body;
        let deadline = control.duration.map(|d| control.start + control.omit + d);
        let progress = control.on_progress.clone();
        let spawned = thread::Builder::new()
            .name(format!("stream-{}", task.stream_id))
            .spawn(move || {
                if let Some(core) = core {
                    pin_current_thread(core);
                }
                let cpu_before = thread_cpu();
                let context = StreamContext {
                    bytes: &counters[index].0,
                    stop: &stop,
                    deadline,
                    progress: progress.as_ref(),
                };
                let end = body(&context);
                let at = Instant::now();
                let cpu_after = thread_cpu();
                let cpu = ProcessCpu {
                    user_seconds: cpu_after.user_seconds - cpu_before.user_seconds,
                    system_seconds: cpu_after.system_seconds - cpu_before.system_seconds,
                };
                let _ = done.send(Finished { index, at, end, cpu });
            });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                let _ = done_tx.send(Finished {
                    index,
                    at: Instant::now(),
                    end: TaskEnd {
                        error: Some(format!("could not start a thread: {e}")),
                        ..TaskEnd::default()
                    },
                    cpu: ProcessCpu::default(),
                });
            }
        }
    }
    drop(done_tx);

    let n = meta.len();
    // Samples are kept until the side's budget is spent; a long test with
    // many streams keeps its first MAX_RECORDED_INTERVALS samples.
    let mut interval_budget = MAX_RECORDED_INTERVALS;

    let start = control.start;
    let omit_at = start + control.omit;
    let stop_at = control.duration.map(|d| omit_at + d);
    let mut omit_taken = control.omit.is_zero();
    let mut omitted_bytes = vec![0u64; n];
    let mut last_sample = vec![0u64; n];
    let mut last_tick = start;
    let mut next_tick = start + control.interval;
    let mut intervals: Vec<Vec<Interval>> = vec![Vec::new(); n];
    let mut finished: Vec<Option<Finished>> = (0..n).map(|_| None).collect();
    let mut remaining = n;

    while remaining > 0 {
        let now = Instant::now();
        let mut wake = next_tick;
        if !omit_taken {
            wake = wake.min(omit_at);
        }
        if let Some(at) = stop_at.filter(|_| !control.stop.load(Ordering::Relaxed)) {
            wake = wake.min(at);
        }
        match done_rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(f) => {
                let i = f.index;
                finished[i] = Some(f);
                remaining -= 1;
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        if !omit_taken && now >= omit_at {
            for (i, c) in counters.iter().enumerate() {
                omitted_bytes[i] = c.0.load(Ordering::Relaxed);
            }
            omit_taken = true;
        }
        if stop_at.is_some_and(|at| now >= at) {
            control.stop.store(true, Ordering::Relaxed);
        }
        if now >= next_tick {
            let mut tick = IntervalTick {
                start_seconds: (last_tick - start).as_secs_f64(),
                end_seconds: (now - start).as_secs_f64(),
                omitted: now <= omit_at + Duration::from_millis(1),
                streams: Vec::with_capacity(n),
            };
            let seconds = (now - last_tick).as_secs_f64();
            for (i, c) in counters.iter().enumerate() {
                if finished[i].is_some() {
                    continue;
                }
                let total = c.0.load(Ordering::Relaxed);
                let bytes = total - last_sample[i];
                last_sample[i] = total;
                tick.streams.push((meta[i].0, meta[i].1, bytes));
                if interval_budget > 0 {
                    interval_budget -= 1;
                    intervals[i].push(Interval {
                        start_seconds: tick.start_seconds,
                        end_seconds: tick.end_seconds,
                        bytes,
                        bits_per_second: bits_per_second(bytes, seconds),
                        omitted: tick.omitted,
                    });
                }
            }
            if let Some(callback) = &control.on_interval {
                callback(&tick);
            }
            last_tick = now;
            while next_tick <= now {
                next_tick += control.interval;
            }
        }
    }
    for handle in handles {
        let _ = handle.join();
    }

    let mut outcome = SideOutcome::default();
    for (i, (stream_id, role, socket)) in meta.into_iter().enumerate() {
        let total = counters[i].0.load(Ordering::Relaxed);
        let Some(f) = finished[i].take() else {
            outcome.streams.push(StreamEnd {
                stream_id,
                role,
                bytes: total,
                seconds: 0.0,
                bits_per_second: 0.0,
                omitted_bytes: 0,
                socket,
                tcp_info: None,
                intervals: std::mem::take(&mut intervals[i]),
                error: Some("the stream thread did not report".into()),
                extras: Extras::default(),
            });
            continue;
        };
        outcome.process = outcome.process + f.cpu;
        // The one window rule: an end's time runs from the end of the
        // warm-up (from the start when it ended inside the warm-up, and is
        // then reported whole) to its last useful work.
        let last = f.end.last_activity.unwrap_or(f.at);
        let (from, omitted) = if last > omit_at && omit_taken {
            (omit_at, omitted_bytes[i])
        } else {
            (start, 0)
        };
        let seconds = last.saturating_duration_since(from).as_secs_f64();
        let bytes = total - omitted;
        if interval_budget > 0 && total > last_sample[i] {
            interval_budget -= 1;
            let tail_seconds = f.at.saturating_duration_since(last_tick).as_secs_f64();
            let tail = total - last_sample[i];
            intervals[i].push(Interval {
                start_seconds: (last_tick.max(start) - start).as_secs_f64(),
                end_seconds: (f.at - start).as_secs_f64(),
                bytes: tail,
                bits_per_second: bits_per_second(tail, tail_seconds),
                omitted: f.at <= omit_at,
            });
        }
        outcome.streams.push(StreamEnd {
            stream_id,
            role,
            bytes,
            seconds,
            bits_per_second: bits_per_second(bytes, seconds),
            omitted_bytes: omitted,
            socket: f.end.socket.unwrap_or(socket),
            tcp_info: f.end.tcp_info,
            intervals: std::mem::take(&mut intervals[i]),
            error: f.end.error,
            extras: f.end.extras,
        });
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn control(duration_ms: u64, omit_ms: u64, interval_ms: u64) -> RunControl {
        RunControl {
            stop: Arc::new(AtomicBool::new(false)),
            start: Instant::now(),
            omit: Duration::from_millis(omit_ms),
            duration: Some(Duration::from_millis(duration_ms)),
            interval: Duration::from_millis(interval_ms),
            cpus: vec![],
            on_interval: None,
            on_progress: None,
        }
    }

    /// A body that "sends" 1000 bytes per millisecond until stopped.
    fn ticking_body() -> StreamBody {
        Box::new(|ctx: &StreamContext| {
            let mut total = 0;
            while !ctx.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                total += 1000;
                ctx.bytes.store(total, Ordering::Relaxed);
            }
            TaskEnd::default()
        })
    }

    #[test]
    fn stop_is_raised_after_omit_plus_duration_and_omit_is_excluded() {
        let ticks = Arc::new(Mutex::new(0));
        let seen = Arc::clone(&ticks);
        let mut ctl = control(300, 200, 100);
        ctl.on_interval = Some(Box::new(move |_| *seen.lock().unwrap() += 1));
        let task = StreamTask {
            stream_id: 7,
            role: Role::Sender,
            socket: SocketBuffers::default(),
            body: ticking_body(),
        };
        let out = run_streams(vec![task], &ctl);
        let elapsed = ctl.start.elapsed().as_secs_f64();
        assert!(elapsed >= 0.5, "stopped too early: {elapsed}");
        let end = &out.streams[0];
        assert_eq!(end.stream_id, 7);
        assert!(end.omitted_bytes > 0);
        assert!((end.seconds - 0.3).abs() < 0.1, "{}", end.seconds);
        let interval_sum: u64 = end.intervals.iter().map(|i| i.bytes).sum();
        assert_eq!(interval_sum, end.bytes + end.omitted_bytes);
        assert!(end.intervals.iter().any(|i| i.omitted));
        assert!(*ticks.lock().unwrap() >= 4);
    }

    #[test]
    fn errors_of_a_stream_are_kept() {
        let ctl = control(10, 0, 1000);
        let task = StreamTask {
            stream_id: 1,
            role: Role::Receiver,
            socket: SocketBuffers::default(),
            body: Box::new(|_| TaskEnd {
                error: Some("connection reset".into()),
                ..TaskEnd::default()
            }),
        };
        let out = run_streams(vec![task], &ctl);
        assert_eq!(out.streams[0].error.as_deref(), Some("connection reset"));
    }
}
