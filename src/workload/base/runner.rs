//! The stream runner every stream workload shares: one OS thread per stream
//! end, a per-thread byte counter the hot loop stores into, and one
//! coordinating thread that samples the counters at each interval, marks
//! the end of the warm-up, and raises the stop flag when the time is up.
//! The hot loops never read the clock, lock, log or allocate.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use std::os::fd::OwnedFd;

use crate::model::{Extras, Interval, IntervalTcp, ProcessCpu, Role, SocketBuffers, StreamEnd, TcpInfo};
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
    /// True for the report that closes a pass over the steps (repeating
    /// the pass's last step): where no progress bar is drawn (stderr is no
    /// terminal), only these are printed, one line per pass.
    pub ends_pass: bool,
}

/// What a side measured in one interval, for live display.
#[derive(Debug, Clone)]
pub struct IntervalTick {
    pub start_seconds: f64,
    pub end_seconds: f64,
    pub omitted: bool,
    pub streams: Vec<TickStream>,
}

/// One stream end's interval, for live display.
#[derive(Debug, Clone)]
pub struct TickStream {
    pub stream_id: u32,
    pub role: Role,
    /// Bytes in this interval.
    pub bytes: u64,
    /// A TCP sender's retransmits, congestion window and round trip.
    pub tcp: Option<IntervalTcp>,
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
    /// When the end's first useful work happened, if later than the
    /// window's start and it should not count the wait (a receiver of
    /// another program's sender, which starts when it starts): its time
    /// starts there.
    pub first_activity: Option<Instant>,
}

impl TaskEnd {
    /// The end of a stream over a kernel socket: its TCP_INFO (where it has
    /// one) and its buffers as they ended, and `error`.
    pub fn of_socket(socket: &socket2::Socket, error: Option<String>) -> TaskEnd {
        TaskEnd {
            tcp_info: crate::probe::tcpinfo::tcp_info(socket),
            socket: Some(crate::probe::tcpinfo::socket_buffers(socket)),
            error,
            ..TaskEnd::default()
        }
    }
}

/// One stream end to run on its own thread.
pub struct StreamTask {
    pub stream_id: u32,
    pub role: Role,
    pub socket: SocketBuffers,
    pub body: StreamBody,
    /// A duplicate of a TCP sender's socket, from which the runner reads
    /// TCP_INFO at each interval (retransmits, congestion window, round
    /// trip); its own descriptor, so the stream closing its socket cannot
    /// hand the number to another file under the runner.
    pub tcp_probe: Option<OwnedFd>,
}

impl StreamTask {
    /// A task without a TCP probe.
    pub fn new(stream_id: u32, role: Role, socket: SocketBuffers, body: StreamBody) -> StreamTask {
        StreamTask {
            stream_id,
            role,
            socket,
            body,
            tcp_probe: None,
        }
    }

    /// The task with a TCP sender's socket to read TCP_INFO from at each
    /// interval (from [`tcp_probe`]).
    pub fn with_probe(mut self, probe: Option<OwnedFd>) -> StreamTask {
        self.tcp_probe = probe;
        self
    }
}

/// A duplicate of a TCP sender's socket for [`StreamTask::with_probe`];
/// None (the stream is then only not sampled) when it cannot be made.
pub fn tcp_probe(socket: &impl std::os::fd::AsFd) -> Option<OwnedFd> {
    socket
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| log::debug!("no per-interval TCP_INFO: {e}"))
        .ok()
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

/// Key of the pinning record ([`Affinity`]) in a stream end's parts.
pub const AFFINITY_KEY: &str = "affinity";

/// Where a pinned stream thread was asked to run, and where the kernel
/// says it may run (read back after pinning): `-A`/`--remote-affinity`
/// shown to have taken effect, or why not.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Affinity {
    pub asked_core: u32,
    /// The thread's CPU set read back with sched_getaffinity(2).
    pub cpus: Vec<u32>,
    /// Why pinning failed (the thread then ran on `cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Pins the calling thread to one core and reads its CPU set back. A
/// refused pin (e.g. a cpuset cgroup without that core) is logged as a
/// warning and recorded in the result, not ignored.
pub fn pin_current_thread(core: u32) -> Affinity {
    let mut error = set_thread_cpus(&[core])
        .err()
        .map(|e| format!("could not pin the stream thread to core {core}: {e}"));
    let cpus = match read_thread_cpus() {
        Ok(cpus) => cpus,
        Err(e) => {
            error.get_or_insert(format!("could not read the stream thread's CPUs back: {e}"));
            Vec::new()
        }
    };
    if let Some(e) = &error {
        log::warn!("{e}");
    }
    Affinity {
        asked_core: core,
        cpus,
        error,
    }
}

/// The cores the calling thread may run on, in order; empty when the
/// kernel would not say.
pub fn current_thread_cpus() -> Vec<u32> {
    read_thread_cpus().unwrap_or_default()
}

/// Lets the calling thread run on `cpus` again after a pin (the set it
/// had before, from [`current_thread_cpus`]); the error says why not.
pub fn release_current_thread(cpus: &[u32]) -> Result<(), String> {
    set_thread_cpus(cpus).map_err(|e| format!("could not let the stream thread run on cores {cpus:?} again: {e}"))
}

/// sched_setaffinity(2) of the calling thread to `cpus` (cores at or
/// above CPU_SETSIZE are left out, so the kernel refuses an empty set).
fn set_thread_cpus(cpus: &[u32]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (cores at
    // or above CPU_SETSIZE are skipped); the call reads only the set.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &core in cpus.iter().filter(|&&c| (c as usize) < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(core as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// sched_getaffinity(2) of the calling thread: its cores, in order.
fn read_thread_cpus() -> std::io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data, filled in by the kernel.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as u32)
            .filter(|&c| libc::CPU_ISSET(c as usize, &set))
            .collect())
    }
}

/// Runs every task to its end and collects the stream ends.
pub fn run_streams(tasks: Vec<StreamTask>, control: &RunControl) -> SideOutcome {
    let counters: Arc<Vec<PaddedCounter>> = Arc::new(tasks.iter().map(|_| PaddedCounter::default()).collect());
    let (done_tx, done_rx) = mpsc::channel::<Finished>();
    let mut meta = Vec::with_capacity(tasks.len());
    let mut probes = Vec::with_capacity(tasks.len());
    let mut handles = Vec::with_capacity(tasks.len());
    for (index, task) in tasks.into_iter().enumerate() {
        meta.push((task.stream_id, task.role, task.socket));
        probes.push(task.tcp_probe);
        let core = (!control.cpus.is_empty()).then(|| control.cpus[index % control.cpus.len()]);
        let thread = StreamThread {
            index,
            counters: Arc::clone(&counters),
            stop: Arc::clone(&control.stop),
            done: done_tx.clone(),
            core,
            deadline: control.duration.map(|d| control.start + control.omit + d),
            progress: control.on_progress.clone(),
        };
        let spawned = thread::Builder::new()
            .name(format!("stream-{}", task.stream_id))
            .spawn(move || thread.run(task.body));
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
    let mut watch = Watch::new(control, meta, probes, counters);
    watch.run(&done_rx, control);
    for handle in handles {
        let _ = handle.join();
    }
    watch.into_outcome()
}

/// What one stream thread needs besides its body.
struct StreamThread {
    index: usize,
    counters: Arc<Vec<PaddedCounter>>,
    stop: Arc<AtomicBool>,
    done: mpsc::Sender<Finished>,
    core: Option<u32>,
    /// When the side's time is up (bodies that end on their own watch it).
    deadline: Option<Instant>,
    progress: Option<ProgressCallback>,
}

impl StreamThread {
    /// Runs the body on this thread and reports when and how it ended.
    fn run(self, body: StreamBody) {
        let affinity = self.core.map(pin_current_thread);
        let cpu_before = thread_cpu();
        let context = StreamContext {
            bytes: &self.counters[self.index].0,
            stop: &self.stop,
            deadline: self.deadline,
            progress: self.progress.as_ref(),
        };
        let mut end = body(&context);
        let at = Instant::now();
        if let Some(affinity) = &affinity {
            end.extras.set(AFFINITY_KEY, affinity);
        }
        let cpu_after = thread_cpu();
        let cpu = ProcessCpu {
            user_seconds: cpu_after.user_seconds - cpu_before.user_seconds,
            system_seconds: cpu_after.system_seconds - cpu_before.system_seconds,
        };
        let _ = self.done.send(Finished {
            index: self.index,
            at,
            end,
            cpu,
        });
    }
}

/// The coordinator's view of a side's streams while they run: the warm-up
/// snapshot, interval samples, and which ends have finished.
struct Watch {
    meta: Vec<(u32, Role, SocketBuffers)>,
    counters: Arc<Vec<PaddedCounter>>,
    /// TCP senders' sockets to read TCP_INFO from while they run (closed
    /// as each ends, so that the connection closes with the stream's own
    /// socket), whether each had one, and the retransmits at the last sample.
    probes: Vec<Option<OwnedFd>>,
    probed: Vec<bool>,
    last_retransmits: Vec<u64>,
    start: Instant,
    omit_at: Instant,
    stop_at: Option<Instant>,
    omit_taken: bool,
    /// When the warm-up's bytes were taken: the interval sampled at that
    /// same instant (or before) is the warm-up's, however late the wake-up.
    omit_taken_at: Option<Instant>,
    warmup_bytes: Vec<u64>,
    last_sample: Vec<u64>,
    last_tick: Instant,
    next_tick: Instant,
    /// Samples are kept until the side's budget is spent; a long test with
    /// many streams keeps its first MAX_RECORDED_INTERVALS samples.
    interval_budget: u64,
    intervals: Vec<Vec<Interval>>,
    finished: Vec<Option<Finished>>,
}

impl Watch {
    fn new(
        control: &RunControl,
        meta: Vec<(u32, Role, SocketBuffers)>,
        probes: Vec<Option<OwnedFd>>,
        counters: Arc<Vec<PaddedCounter>>,
    ) -> Watch {
        let n = meta.len();
        let start = control.start;
        let omit_at = start + control.omit;
        Watch {
            meta,
            counters,
            probed: probes.iter().map(Option::is_some).collect(),
            probes,
            last_retransmits: vec![0; n],
            start,
            omit_at,
            stop_at: control.duration.map(|d| omit_at + d),
            omit_taken: control.omit.is_zero(),
            omit_taken_at: control.omit.is_zero().then_some(start),
            warmup_bytes: vec![0; n],
            last_sample: vec![0; n],
            last_tick: start,
            next_tick: start + control.interval,
            interval_budget: MAX_RECORDED_INTERVALS,
            intervals: vec![Vec::new(); n],
            finished: (0..n).map(|_| None).collect(),
        }
    }

    /// Waits for every stream end, marking the warm-up's end, raising the
    /// stop flag when the time is up, and sampling at each interval.
    fn run(&mut self, done: &mpsc::Receiver<Finished>, control: &RunControl) {
        let mut remaining = self.meta.len();
        while remaining > 0 {
            let now = Instant::now();
            let mut wake = self.next_tick;
            if !self.omit_taken {
                wake = wake.min(self.omit_at);
            }
            if let Some(at) = self.stop_at.filter(|_| !control.stop.load(Ordering::Relaxed)) {
                wake = wake.min(at);
            }
            match done.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(f) => {
                    let i = f.index;
                    self.probes[i] = None;
                    self.finished[i] = Some(f);
                    remaining -= 1;
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            if !self.omit_taken && now >= self.omit_at {
                self.take_warmup(now);
            }
            if self.stop_at.is_some_and(|at| now >= at) {
                control.stop.store(true, Ordering::Relaxed);
            }
            if now >= self.next_tick {
                self.sample(now, control);
            }
        }
    }

    /// The warm-up's end, seen at `now`: each end's bytes so far are its
    /// warm-up's.
    fn take_warmup(&mut self, now: Instant) {
        for (i, c) in self.counters.iter().enumerate() {
            self.warmup_bytes[i] = c.0.load(Ordering::Relaxed);
        }
        self.omit_taken = true;
        self.omit_taken_at = Some(now);
    }

    /// One interval sample of every running stream end. The interval is
    /// the warm-up's (omitted) when its bytes are in the warm-up snapshot:
    /// sampled before it or at the same wake-up. The clock's reading does
    /// not decide it, so a wake-up late by a loaded machine cannot unmark
    /// the warm-up's interval (issue 32).
    fn sample(&mut self, now: Instant, control: &RunControl) {
        let mut tick = IntervalTick {
            start_seconds: (self.last_tick - self.start).as_secs_f64(),
            end_seconds: (now - self.start).as_secs_f64(),
            omitted: self.omit_taken_at.map_or(true, |taken| now <= taken),
            streams: Vec::with_capacity(self.meta.len()),
        };
        let seconds = (now - self.last_tick).as_secs_f64();
        for i in 0..self.counters.len() {
            if self.finished[i].is_some() {
                continue;
            }
            let total = self.counters[i].0.load(Ordering::Relaxed);
            let bytes = total - self.last_sample[i];
            self.last_sample[i] = total;
            let tcp = self.probes[i]
                .as_ref()
                .and_then(crate::probe::tcpinfo::tcp_info)
                .map(|info| self.interval_tcp(i, &info));
            tick.streams.push(TickStream {
                stream_id: self.meta[i].0,
                role: self.meta[i].1,
                bytes,
                tcp,
            });
            if self.interval_budget > 0 {
                self.interval_budget -= 1;
                self.intervals[i].push(
                    Interval {
                        start_seconds: tick.start_seconds,
                        end_seconds: tick.end_seconds,
                        bytes,
                        bits_per_second: bits_per_second(bytes, seconds),
                        omitted: tick.omitted,
                        ..Interval::default()
                    }
                    .with_tcp(tcp),
                );
            }
        }
        if let Some(callback) = &control.on_interval {
            callback(&tick);
        }
        self.last_tick = now;
        while self.next_tick <= now {
            self.next_tick += control.interval;
        }
    }

    /// End `i`'s TCP state since the last sample, from TCP_INFO read now.
    fn interval_tcp(&mut self, i: usize, info: &TcpInfo) -> IntervalTcp {
        let retransmits = info.retransmits.saturating_sub(self.last_retransmits[i]);
        self.last_retransmits[i] = info.retransmits;
        IntervalTcp {
            retransmits,
            congestion_window_bytes: u64::from(info.congestion_window_segments) * u64::from(info.send_mss_bytes),
            rtt_us: info.rtt_us,
        }
    }

    /// Every stream end with its bytes, time and rate over its measured
    /// window, and the CPU time of the stream threads.
    fn into_outcome(mut self) -> SideOutcome {
        let mut outcome = SideOutcome::default();
        let meta = std::mem::take(&mut self.meta);
        for (i, (stream_id, role, socket)) in meta.into_iter().enumerate() {
            let total = self.counters[i].0.load(Ordering::Relaxed);
            let intervals = std::mem::take(&mut self.intervals[i]);
            let Some(f) = self.finished[i].take() else {
                outcome.streams.push(StreamEnd {
                    stream_id,
                    role,
                    bytes: total,
                    socket,
                    intervals,
                    error: Some("the stream thread did not report".into()),
                    ..StreamEnd::default()
                });
                continue;
            };
            outcome.process = outcome.process + f.cpu.clone();
            outcome
                .streams
                .push(self.end_of(i, stream_id, role, socket, intervals, f));
        }
        outcome
    }

    fn end_of(
        &mut self,
        i: usize,
        stream_id: u32,
        role: Role,
        socket: SocketBuffers,
        mut intervals: Vec<Interval>,
        f: Finished,
    ) -> StreamEnd {
        let total = self.counters[i].0.load(Ordering::Relaxed);
        // The one window rule: an end's time runs from the end of the
        // warm-up to its last useful work. An end that ended inside the
        // warm-up (a count reached, a stop) is reported whole, from the
        // start. An end of a timed test that was still there when the
        // warm-up ended but did nothing useful after it (a receiver whose
        // sender went quiet, a port a switch flooded only before anyone
        // joined) measured nothing: its bytes were all the warm-up's, and
        // its window runs to when it ended, not back over the warm-up.
        let last = f.end.last_activity.unwrap_or(f.at);
        let measured_from_the_warmup = self.omit_taken && last > self.omit_at;
        let quiet_after_the_warmup =
            self.stop_at.is_some() && self.omit_taken_at.is_some_and(|taken| f.at > taken) && self.omit_at > self.start;
        let (from, omitted, last) = if measured_from_the_warmup {
            (self.omit_at, self.warmup_bytes[i], last)
        } else if quiet_after_the_warmup {
            (self.omit_at, self.warmup_bytes[i].min(total), f.at.max(self.omit_at))
        } else {
            (self.start, 0, last)
        };
        let from = f.end.first_activity.map_or(from, |first| first.clamp(from, last));
        let seconds = last.saturating_duration_since(from).as_secs_f64();
        let bytes = total - omitted;
        if self.interval_budget > 0 && total > self.last_sample[i] {
            self.interval_budget -= 1;
            let tail_seconds = f.at.saturating_duration_since(self.last_tick).as_secs_f64();
            let tail = total - self.last_sample[i];
            // The stream's own TCP_INFO at its end closes a probed sender's last interval.
            let tcp = match (self.probed[i], &f.end.tcp_info) {
                (true, Some(info)) => Some(self.interval_tcp(i, info)),
                _ => None,
            };
            intervals.push(
                Interval {
                    start_seconds: (self.last_tick.max(self.start) - self.start).as_secs_f64(),
                    end_seconds: (f.at - self.start).as_secs_f64(),
                    bytes: tail,
                    bits_per_second: bits_per_second(tail, tail_seconds),
                    omitted: self.omit_taken_at.map_or(true, |taken| f.at <= taken),
                    ..Interval::default()
                }
                .with_tcp(tcp),
            );
        }
        StreamEnd {
            stream_id,
            role,
            bytes,
            seconds,
            bits_per_second: bits_per_second(bytes, seconds),
            warmup_bytes: omitted,
            socket: f.end.socket.unwrap_or(socket),
            tcp_info: f.end.tcp_info,
            intervals,
            error: f.end.error,
            extras: f.end.extras,
        }
    }
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
        let task = StreamTask::new(7, Role::Sender, SocketBuffers::default(), ticking_body());
        let out = run_streams(vec![task], &ctl);
        let elapsed = ctl.start.elapsed().as_secs_f64();
        // Orderings of the clock, true however late a loaded machine runs
        // the threads: the stop never comes before warm-up + duration, the
        // measured window starts at the end of the warm-up and ends by now.
        assert!(elapsed >= 0.5, "stopped too early: {elapsed}");
        let end = &out.streams[0];
        assert_eq!(end.stream_id, 7);
        assert!(
            end.seconds >= 0.3,
            "the window is shorter than the duration: {}",
            end.seconds
        );
        assert!(
            end.seconds <= elapsed - 0.2,
            "the window started before the warm-up's end"
        );
        // Every byte counted once: in the warm-up or in the measured part.
        let interval_sum: u64 = end.intervals.iter().map(|i| i.bytes).sum();
        assert_eq!(interval_sum, end.bytes + end.warmup_bytes);
        assert!(end.bytes > 0);
        // One callback per recorded sample time (a late wake-up merges ticks).
        let ticks = *ticks.lock().unwrap();
        assert!(ticks >= 1 && ticks <= end.intervals.len(), "{ticks} ticks");
    }

    #[test]
    fn the_warm_up_interval_is_omitted_however_late_the_wake_up() {
        // -O 100ms -i 100ms: the warm-up's end and the first tick fall on
        // one instant; a loaded machine wakes 30 ms late.
        let ctl = control(300, 100, 100);
        let counters = Arc::new(vec![PaddedCounter::default()]);
        let meta = vec![(1, Role::Sender, SocketBuffers::default())];
        let mut w = Watch::new(&ctl, meta, vec![None], Arc::clone(&counters));
        let late = ctl.start + Duration::from_millis(130);
        counters[0].0.store(5000, Ordering::Relaxed);
        w.take_warmup(late);
        w.sample(late, &ctl);
        counters[0].0.store(9000, Ordering::Relaxed);
        let next = ctl.start + Duration::from_millis(200);
        w.sample(next, &ctl);
        let marks: Vec<(u64, bool)> = w.intervals[0].iter().map(|i| (i.bytes, i.omitted)).collect();
        assert_eq!(marks, [(5000, true), (4000, false)]);
        assert_eq!(w.warmup_bytes[0], 5000);
        // A sample before the warm-up ends is the warm-up's too.
        let mut w = Watch::new(
            &ctl,
            vec![(1, Role::Sender, SocketBuffers::default())],
            vec![None],
            counters,
        );
        w.sample(ctl.start + Duration::from_millis(50), &ctl);
        assert!(w.intervals[0][0].omitted);
    }

    #[test]
    fn errors_of_a_stream_are_kept() {
        let ctl = control(10, 0, 1000);
        let task = StreamTask::new(
            1,
            Role::Receiver,
            SocketBuffers::default(),
            Box::new(|_| TaskEnd {
                error: Some("connection reset".into()),
                ..TaskEnd::default()
            }),
        );
        let out = run_streams(vec![task], &ctl);
        assert_eq!(out.streams[0].error.as_deref(), Some("connection reset"));
    }

    /// One end's report from a Watch whose warm-up was taken at
    /// `taken_ms` with `warmup` bytes counted, the end having done its last
    /// useful work at `last_ms` and returned at `ended_ms`, with `total`
    /// bytes; `timed`: a time ends the test (else a count).
    fn end_with(timed: bool, taken_ms: Option<u64>, warmup: u64, last_ms: u64, ended_ms: u64, total: u64) -> StreamEnd {
        let mut ctl = control(1000, 500, 100);
        if !timed {
            ctl.duration = None;
        }
        let counters = Arc::new(vec![PaddedCounter::default()]);
        let meta = vec![(1, Role::Receiver, SocketBuffers::default())];
        let mut w = Watch::new(&ctl, meta, vec![None], Arc::clone(&counters));
        let at = |ms: u64| ctl.start + Duration::from_millis(ms);
        if let Some(taken) = taken_ms {
            counters[0].0.store(warmup, Ordering::Relaxed);
            w.take_warmup(at(taken));
        }
        counters[0].0.store(total, Ordering::Relaxed);
        let f = Finished {
            index: 0,
            at: at(ended_ms),
            end: TaskEnd {
                last_activity: Some(at(last_ms)),
                ..TaskEnd::default()
            },
            cpu: ProcessCpu::default(),
        };
        w.interval_budget = 0;
        w.end_of(0, 1, Role::Receiver, SocketBuffers::default(), Vec::new(), f)
    }

    /// The window rule's three cases (-O 500ms): measured from the warm-up's
    /// end; ended inside the warm-up, reported whole; still there after a
    /// timed test's warm-up but quiet since: nothing measured, not the
    /// warm-up's rate reported as the test's.
    #[test]
    fn an_end_quiet_since_the_warm_up_measured_nothing_and_one_that_ended_in_it_is_whole() {
        // Data until 900 ms: 6000 of 10000 bytes after the warm-up, over 400 ms.
        let end = end_with(true, Some(510), 4000, 900, 950, 10_000);
        assert_eq!((end.bytes, end.warmup_bytes), (6000, 4000));
        assert!((end.seconds - 0.4).abs() < 1e-9, "{}", end.seconds);
        // Ended at 300 ms, before the warm-up was taken: whole, from the start.
        let end = end_with(true, None, 0, 290, 300, 3000);
        assert_eq!((end.bytes, end.warmup_bytes), (3000, 0));
        assert!((end.seconds - 0.29).abs() < 1e-9, "{}", end.seconds);
        // Last datagram at 300 ms, the receiver there until 1600 ms: 0 bytes
        // over the 1.1 s it was there after the warm-up, rate 0.
        let end = end_with(true, Some(510), 3000, 300, 1600, 3000);
        assert_eq!((end.bytes, end.warmup_bytes, end.bits_per_second), (0, 3000, 0.0));
        assert!((end.seconds - 1.1).abs() < 1e-9, "{}", end.seconds);
        // A count that was reached inside the warm-up, its receiver drained
        // past it: whole, as a count-ended test inside its warm-up is.
        let end = end_with(false, Some(510), 3000, 300, 600, 3000);
        assert_eq!((end.bytes, end.warmup_bytes), (3000, 0));
    }
}
