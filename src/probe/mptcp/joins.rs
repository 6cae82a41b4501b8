//! When each subflow of a connection joined: the kernel keeps no such time
//! (neither MPTCP_INFO nor a subflow's TCP_INFO has one), so a thread
//! polls the connection's subflow addresses while its stream runs and
//! notes when each pair was first seen. Every millisecond for the first
//! 200 ms (the joins of a healthy path manager come within a few round
//! trips), then every 10 ms until the stream ends.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::socket::subflow_addresses;
use super::MptcpConnection;

/// How often the addresses are read, and for how long at the faster pace.
const FAST: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_millis(10);
const FAST_FOR: Duration = Duration::from_millis(200);

/// A subflow as first seen: its addresses and the seconds since the watch
/// began.
pub type Joined = (SocketAddr, SocketAddr, f64);

/// Watches one MPTCP connection's subflows come and stay; [`JoinWatch::finish`]
/// stops it and writes their join times into the connection's figures.
pub struct JoinWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Joined>>>,
}

impl JoinWatch {
    /// Starts watching the connection on `socket` (a second handle on it,
    /// which the watch keeps until it stops). None when no thread could be
    /// started: the figures then have no join times, with a warning.
    pub fn start(socket: Socket) -> Option<JoinWatch> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("mptcp-joins".into())
            .spawn(move || watch(&socket, &stopped));
        match thread {
            Ok(thread) => Some(JoinWatch {
                stop,
                thread: Some(thread),
            }),
            Err(e) => {
                log::warn!("cannot start the thread that times MPTCP subflow joins: {e}; no join times");
                None
            }
        }
    }

    /// Stops watching; what was seen, in the order first seen.
    fn stop(&mut self) -> Vec<Joined> {
        self.stop.store(true, Ordering::Relaxed);
        let Some(thread) = self.thread.take() else {
            return Vec::new();
        };
        thread.thread().unpark();
        thread.join().unwrap_or_default()
    }

    /// Stops watching and gives each subflow of `connection` the time it
    /// was first seen (a subflow that joined after the last read keeps
    /// None).
    pub fn finish(mut self, connection: &mut MptcpConnection) {
        let joined = self.stop();
        for s in &mut connection.subflows {
            s.joined_after_seconds = joined
                .iter()
                .find(|(local, remote, _)| *local == s.local && *remote == s.remote)
                .map(|j| j.2);
        }
    }
}

impl Drop for JoinWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The watch's thread: reads the subflows' addresses until told to stop
/// or the connection stops answering (closed, or fell back to TCP).
fn watch(socket: &Socket, stop: &AtomicBool) -> Vec<Joined> {
    let start = Instant::now();
    let mut seen: Vec<Joined> = Vec::new();
    let mut first = true;
    while !stop.load(Ordering::Relaxed) {
        let now = start.elapsed();
        // What the first read finds was up when the stream began.
        let at = if first { 0.0 } else { now.as_secs_f64() };
        first = false;
        match subflow_addresses(socket) {
            Ok(Some(pairs)) => {
                for (local, remote) in pairs {
                    if !seen.iter().any(|(l, r, _)| *l == local && *r == remote) {
                        seen.push((local, remote, at));
                    }
                }
            }
            Ok(None) | Err(_) => break,
        }
        std::thread::park_timeout(if now < FAST_FOR { FAST } else { SLOW });
    }
    seen
}
