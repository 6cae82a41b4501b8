//! `tcp`: bulk TCP streams, one thread and one connection per stream, in
//! either or both directions, like netperf TCP_STREAM and iperf3.
//!
//! Options of its own (in `TestSpec::params`): MSS, TCP_NODELAY, congestion
//! control, zero-copy send through `sendfile` from a memfd, and discarding
//! receive with `MSG_TRUNC` (the kernel drops the data without copying it).
//! Both fast paths are recorded in the spec of the result, and what they
//! did in the stream ends (`tcp`: [`TcpEnd`]).

pub mod args;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::data_conn::{self, Configure};
use super::runner::{run_streams, StreamBody, StreamContext, StreamTask, TaskEnd};
use super::{
    Aborter, AgentNet, AgentSide, ClientNet, RunControl, Side, SideOptions, SideOutcome, SpecError, TestSpec, Workload,
    WorkloadError,
};
use crate::model::spec::out_of_range;
use crate::model::{Flow, Party, Role};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;

/// Key of the fast-path record of a stream end.
pub const KEY: &str = "tcp";

/// What the fast paths did on one end (present with `--zerocopy` on the
/// sender, `--discard` on the receiver): evidence, not the option echoed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpEnd {
    /// sendfile(2) calls that moved bytes (`--zerocopy`, sender).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sendfile_calls: Option<u64>,
    /// Whether the receive buffer was still never written at the end, i.e.
    /// the kernel discarded the data without copying it (`--discard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_buffer_untouched: Option<bool>,
}

/// Parameters of the `tcp` workload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpParams {
    /// TCP_MAXSEG to request on both ends.
    #[serde(default)]
    pub mss: Option<u32>,
    /// TCP_NODELAY on both ends.
    #[serde(default)]
    pub nodelay: bool,
    /// TCP_CONGESTION on both ends (the sender's matters).
    #[serde(default)]
    pub congestion: Option<String>,
    /// Send with sendfile(2) from a memory file instead of send(2).
    #[serde(default)]
    pub zerocopy: bool,
    /// Receive with MSG_TRUNC: the kernel discards the data, no copy.
    #[serde(default)]
    pub discard: bool,
}

/// Linux accepts TCP_MAXSEG from 88 bytes; above 65495 it is meaningless.
pub const MSS_RANGE: std::ops::RangeInclusive<u32> = 88..=65495;

/// The `tcp` workload.
pub struct TcpStream;

/// How `tcp` results read: bulk throughput, and its own case.
pub struct TcpResults;

impl super::ResultKind for TcpResults {
    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let mut parts = vec![("workload", "TCP".to_string())];
        parts.extend(super::case::stream_parts(spec, "writes"));
        let p: TcpParams = spec.params().unwrap_or_default();
        if p.zerocopy {
            parts.push(("zerocopy", "zero-copy".into()));
        }
        if p.discard {
            parts.push(("discard", "discarding receive".into()));
        }
        if let Some(cc) = p.congestion {
            parts.push(("congestion", format!("cc {cc}")));
        }
        if let Some(mss) = p.mss {
            parts.push(("mss", format!("MSS {mss}")));
        }
        if p.nodelay {
            parts.push(("nodelay", "nodelay".into()));
        }
        parts
    }
}

impl Workload for TcpStream {
    fn results(&self) -> &'static dyn super::ResultKind {
        &TcpResults
    }

    fn name(&self) -> &'static str {
        "tcp"
    }

    fn offered_rate(&self, _spec: &TestSpec) -> OfferedRate {
        // No pacing: as fast as congestion control allows.
        OfferedRate::Unlimited
    }

    fn peer_tests(&self) -> bool {
        true
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::TcpOptions> = super::args::ArgsOf::new(super::args::length_option);
        &LINE
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let params: TcpParams = spec.params()?;
        if let Some(mss) = params.mss {
            if !MSS_RANGE.contains(&mss) {
                return Err(out_of_range(
                    "-M/--mss",
                    format!("{}..={} bytes", MSS_RANGE.start(), MSS_RANGE.end()),
                    mss,
                ));
            }
        }
        if let Some(cc) = &params.congestion {
            let available = tcpinfo::available_congestion_controls();
            if !available.is_empty() && !available.iter().any(|a| a == cc) {
                return Err(SpecError::Invalid(format!(
                    "congestion control '{cc}' is not available on {}; available: {} \
                     (others may load with 'modprobe tcp_{cc}')",
                    crate::probe::host::hostname(),
                    available.join(", ")
                )));
            }
        }
        Ok(())
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: TcpParams = spec.params()?;
        let listener = data_conn::listen(
            net.local_ip,
            (spec.flows().len() as i32).max(16),
            &configure(&spec.agent, &params),
        )?;
        Ok(Box::new(TcpAgent {
            listener,
            spec: spec.clone(),
            params,
            net: net.clone(),
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: TcpParams = spec.params()?;
        let port = *net
            .data_ports
            .first()
            .ok_or_else(|| WorkloadError::Setup("the agent named no data port".into()))?;
        let mut sockets = Vec::new();
        {
            let configure = configure(&spec.client, &params);
            for (id, _) in spec.flows() {
                sockets.push((id, data_conn::connect_stream(net, port, id, &configure)?));
            }
        }
        Ok(Box::new(TcpSide::new(Party::Client, spec, params, sockets)))
    }
}

/// Socket options set before connect (client) or listen (agent); the
/// `loaded` workload's load streams take the same.
pub(crate) fn configure<'a>(
    side: &'a SideOptions,
    params: &'a TcpParams,
) -> impl Fn(&Socket) -> Result<(), WorkloadError> + 'a {
    move |socket: &Socket| {
        data_conn::apply_buffers(socket, side)?;
        if let Some(mss) = params.mss {
            socket
                .set_mss(mss)
                .map_err(WorkloadError::io(format!("setting TCP_MAXSEG to {mss}")))?;
        }
        if params.nodelay {
            socket
                .set_nodelay(true)
                .map_err(WorkloadError::io("setting TCP_NODELAY"))?;
        }
        if let Some(cc) = &params.congestion {
            socket
                .set_tcp_congestion(cc.as_bytes())
                .map_err(WorkloadError::io(format!("setting congestion control '{cc}'")))?;
        }
        Ok(())
    }
}

struct TcpAgent {
    listener: Socket,
    spec: TestSpec,
    params: TcpParams,
    net: AgentNet,
}

impl AgentSide for TcpAgent {
    fn data_ports(&self) -> Vec<u16> {
        vec![data_conn::local_port(&self.listener)]
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        let ids: Vec<u32> = self.spec.flows().iter().map(|(id, _)| *id).collect();
        let accepted = data_conn::accept_streams(&self.listener, &self.net, &ids, deadline)?;
        {
            let configure: Configure = &configure(&self.spec.agent, &self.params);
            for socket in accepted.values() {
                // Buffers and MSS are inherited from the listener, but set
                // everything again: NODELAY and congestion are per socket.
                configure(socket)?;
            }
        }
        Ok(Box::new(TcpSide::new(
            Party::Agent,
            &self.spec,
            self.params,
            accepted.into_iter().collect(),
        )))
    }
}

/// One end's streams, connected.
struct TcpSide {
    host: Party,
    spec: TestSpec,
    params: TcpParams,
    sockets: Vec<(u32, Flow, Socket)>,
}

impl TcpSide {
    fn new(host: Party, spec: &TestSpec, params: TcpParams, sockets: Vec<(u32, Socket)>) -> TcpSide {
        let flows = spec.flows();
        let sockets = sockets
            .into_iter()
            .filter_map(|(id, s)| flows.iter().find(|(f, _)| *f == id).map(|(_, flow)| (id, *flow, s)))
            .collect();
        TcpSide {
            host,
            spec: spec.clone(),
            params,
            sockets,
        }
    }
}

impl Side for TcpSide {
    fn aborter(&self) -> Aborter {
        data_conn::aborter(&self.sockets.iter().map(|(_, _, s)| s).collect::<Vec<_>>())
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let message = self.spec.message_bytes as usize;
        let senders = self.sockets.iter().filter(|(_, f, _)| f.sender() == self.host).count() as u64;
        let mut tasks = Vec::new();
        let mut sender_index = 0u64;
        for (id, flow, socket) in self.sockets {
            let buffers = tcpinfo::socket_buffers(&socket);
            let (role, body): (Role, StreamBody) = if flow.sender() == self.host {
                // A byte count is shared out among the streams of this side.
                let quota = self
                    .spec
                    .bytes
                    .map(|total| total / senders + u64::from(sender_index < total % senders));
                sender_index += 1;
                let zerocopy = self.params.zerocopy;
                (
                    Role::Sender,
                    Box::new(move |ctx: &StreamContext| send_stream(socket, message, quota, zerocopy, ctx)),
                )
            } else {
                let discard = self.params.discard;
                (
                    Role::Receiver,
                    Box::new(move |ctx: &StreamContext| receive_stream(socket, message, discard, ctx)),
                )
            };
            tasks.push(StreamTask {
                stream_id: id,
                role,
                socket: buffers,
                body,
            });
        }
        run_streams(tasks, control)
    }
}

fn last_os_error(what: &str) -> Option<std::io::Error> {
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::Interrupted {
        None
    } else {
        log::debug!("{what}: {e}");
        Some(e)
    }
}

/// A memory file of `len` bytes to sendfile(2) from.
fn memfd_of(len: usize) -> std::io::Result<OwnedFd> {
    // SAFETY: memfd_create takes a NUL-terminated name; the fd is owned here.
    let fd = unsafe { libc::memfd_create(c"nicbench-send".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut f = std::fs::File::from(file.try_clone()?);
    std::io::Write::write_all(&mut f, &pattern)?;
    Ok(file)
}

/// The sender's hot loop: one syscall and one counter store per message.
pub(crate) fn send_stream(
    socket: Socket,
    message: usize,
    quota: Option<u64>,
    zerocopy: bool,
    ctx: &StreamContext,
) -> TaskEnd {
    send_stream_held(socket, message, quota, zerocopy, None, ctx)
}

/// [`send_stream`] that pauses while `hold` is raised (the `loaded`
/// workload's phases): one more relaxed load per message, and a 1 ms nap
/// per turn while held.
pub(crate) fn send_stream_held(
    socket: Socket,
    message: usize,
    quota: Option<u64>,
    zerocopy: bool,
    hold: Option<&AtomicBool>,
    ctx: &StreamContext,
) -> TaskEnd {
    let fd = socket.as_raw_fd();
    let buffer: Vec<u8> = (0..message).map(|i| (i % 251) as u8).collect();
    let memfd = if zerocopy {
        match memfd_of(message) {
            Ok(f) => Some(f),
            Err(e) => {
                return TaskEnd {
                    error: Some(format!("zero-copy send needs a memory file: {e}")),
                    ..TaskEnd::default()
                }
            }
        }
    } else {
        None
    };
    let mut total = 0u64;
    let mut sendfile_calls = 0u64;
    let mut error = None;
    while !ctx.stop.load(Ordering::Relaxed) {
        if hold.is_some_and(|h| h.load(Ordering::Relaxed)) {
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let want = match quota {
            Some(q) if q - total < message as u64 => (q - total) as usize,
            _ => message,
        };
        if want == 0 {
            break;
        }
        // SAFETY: the buffer outlives the call; fds are open.
        let n = unsafe {
            match &memfd {
                Some(file) => {
                    let mut offset: libc::off_t = 0;
                    libc::sendfile(fd, file.as_raw_fd(), &mut offset, want)
                }
                None => libc::send(fd, buffer.as_ptr() as *const libc::c_void, want, libc::MSG_NOSIGNAL),
            }
        };
        if n < 0 {
            if let Some(e) = last_os_error("send") {
                error = Some(format!("send failed after {total} bytes: {e}"));
                break;
            }
            continue;
        }
        total += n as u64;
        sendfile_calls += u64::from(memfd.is_some() && n > 0);
        ctx.bytes.store(total, Ordering::Relaxed);
    }
    let _ = socket.shutdown(std::net::Shutdown::Write);
    let mut end = TaskEnd {
        tcp_info: tcpinfo::tcp_info(&socket),
        socket: Some(tcpinfo::socket_buffers(&socket)),
        error,
        ..TaskEnd::default()
    };
    if zerocopy {
        let part = TcpEnd {
            sendfile_calls: Some(sendfile_calls),
            ..TcpEnd::default()
        };
        end.extras.set(KEY, &part);
    }
    end
}

/// The receiver's hot loop: read until the sender closes.
pub(crate) fn receive_stream(socket: Socket, message: usize, discard: bool, ctx: &StreamContext) -> TaskEnd {
    let fd = socket.as_raw_fd();
    let mut buffer = vec![0u8; message];
    let flags = if discard { libc::MSG_TRUNC } else { 0 };
    let mut total = 0u64;
    let mut error = None;
    loop {
        // SAFETY: the buffer is `message` bytes long and outlives the call.
        let n = unsafe { libc::recv(fd, buffer.as_mut_ptr() as *mut libc::c_void, message, flags) };
        if n == 0 {
            break;
        }
        if n < 0 {
            if let Some(e) = last_os_error("recv") {
                error = Some(format!("receive failed after {total} bytes: {e}"));
                break;
            }
            continue;
        }
        total += n as u64;
        ctx.bytes.store(total, Ordering::Relaxed);
    }
    let mut end = TaskEnd {
        tcp_info: tcpinfo::tcp_info(&socket),
        socket: Some(tcpinfo::socket_buffers(&socket)),
        error,
        ..TaskEnd::default()
    };
    if discard {
        // The buffer starts zeroed and the sender's pattern is not: a
        // single copied byte would show.
        let part = TcpEnd {
            receive_buffer_untouched: Some(total > 0 && buffer.iter().all(|&b| b == 0)),
            ..TcpEnd::default()
        };
        end.extras.set(KEY, &part);
    }
    end
}
