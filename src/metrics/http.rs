//! [`MetricsServer`]: a minimal HTTP/1.1 server for `/metrics` and
//! `/probe`, GET only, one request per connection. Written by hand rather
//! than with an HTTP crate so that every bound is ours and visible. One
//! acceptor thread reads every request head itself, without blocking (at
//! most 8 KiB, whole within one deadline from the accept: a slowloris
//! client is cut off at it however slowly it trickles), so a silent
//! socket costs a place in a table and never a worker; a fixed pool of
//! worker threads answers complete requests from a bounded queue (past it
//! a request is answered 503 at once), with a write deadline and no
//! request body. A handler that panics answers 500; the server keeps
//! serving. Before its head is read a connection passes the agent's
//! connection gate when the server belongs to one (per-address rate and
//! connections held, shared with the control port) and takes a place in
//! the server's fair slots (`protocol::slots`: [`PENDING`] places, a
//! quarter per network before the head is complete, an idle one closed to
//! make room for a less represented network); a complete request from an
//! address already answered on [`PER_ADDRESS`] workers is refused.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::blackbox::{ProbeError, ProbeQuery};
use crate::protocol::gate::{ConnectionGate, Pass};
use crate::protocol::slots::{Slot, SlotTable};

/// Largest request head (request line and headers) read.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Time a client has to send its whole request head.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Time a client has to take the whole response.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// Worker threads answering requests.
pub const WORKERS: usize = 4;
/// Complete requests waiting for a worker; more are answered 503 at once.
pub const QUEUE: usize = 16;
/// Requests one client address may have queued or answered at once.
pub const PER_ADDRESS: usize = WORKERS / 2;
/// Connections whose request head is still arriving, read by the acceptor.
pub const PENDING: usize = 64;
/// Of those, from one address at most.
pub const PENDING_PER_ADDRESS: usize = 8;

/// A connection's places at the gates and in the slots, given back when it
/// is answered or dropped.
struct Places {
    _passes: Vec<Pass>,
    slot: Slot,
}

/// A complete request head with its connection, for a worker.
type Admitted = (TcpStream, Vec<u8>, Places);

/// Runs one probe: the agent's test toward the query's target.
pub type ProbeHandler = Box<dyn Fn(&ProbeQuery) -> Result<String, ProbeError> + Send + Sync>;
/// Renders the `/metrics` text (OpenMetrics).
pub type MetricsRenderer = Box<dyn Fn() -> String + Send + Sync>;

/// A bearer token `/probe` requires (`serve --metrics-token-file`).
#[derive(Clone)]
pub struct BearerToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// A token from its text (surrounding white space is not part of it).
    pub fn new(token: &str) -> Result<BearerToken, String> {
        let token = token.trim();
        if token.is_empty() {
            return Err("the token is empty".into());
        }
        if !token.chars().all(|c| c.is_ascii_graphic()) {
            return Err("the token must be printable ASCII without spaces".into());
        }
        Ok(BearerToken {
            digest: Sha256::digest(token.as_bytes()).into(),
        })
    }

    /// Reads the token from a file (its first line).
    pub fn from_file(path: &std::path::Path) -> Result<BearerToken, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        BearerToken::new(text.lines().next().unwrap_or("")).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// True when the `Authorization` header carries this token. Compared
    /// as SHA-256 digests in constant time: neither the token's bytes nor
    /// its length leak through timing.
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        let Some(given) = authorization.and_then(|a| {
            let (scheme, rest) = a.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        }) else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        bool::from(self.digest.ct_eq(&digest))
    }
}

/// What the server serves.
pub struct Routes {
    pub metrics: MetricsRenderer,
    /// `/probe`; None answers 404 with a hint.
    pub probe: Option<ProbeHandler>,
    /// Required on `/probe` when set.
    pub probe_token: Option<BearerToken>,
    /// The gate of the agent this server belongs to: every connection
    /// passes it as a control connection does.
    pub gate: Option<Arc<ConnectionGate>>,
}

impl Routes {
    /// Only `/metrics`.
    pub fn metrics(render: impl Fn() -> String + Send + Sync + 'static) -> Routes {
        Routes {
            metrics: Box::new(render),
            probe: None,
            probe_token: None,
            gate: None,
        }
    }
}

/// A running metrics server; stops (and joins its threads) when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

/// One HTTP answer.
struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    extra_header: Option<&'static str>,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Response {
        let mut body = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body,
            extra_header: None,
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

impl MetricsServer {
    /// Listens on `addr` (port 0: any free port) and serves `routes` until dropped.
    pub fn start(addr: SocketAddr, routes: Routes) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shutdown = Arc::new(AtomicBool::new(false));
        let routes = Arc::new(routes);
        let probing = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = sync_channel::<Admitted>(QUEUE);
        let gates = Gates::new(routes.gate.clone());
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::new();
        for i in 0..WORKERS {
            let (rx, routes, probing) = (Arc::clone(&rx), Arc::clone(&routes), Arc::clone(&probing));
            threads.push(
                thread::Builder::new()
                    .name(format!("metrics-http-{i}"))
                    .spawn(move || worker(&rx, &routes, &probing))?,
            );
        }
        let stop = Arc::clone(&shutdown);
        threads.push(
            thread::Builder::new()
                .name("metrics-accept".into())
                .spawn(move || accept_loop(listener, tx, &gates, &stop))?,
        );
        Ok(MetricsServer {
            addr,
            shutdown,
            threads,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The gates a connection passes: the agent's, when the server belongs to
/// one, the server's fair slots while its head arrives, and the server's
/// own bound per address on requests answered.
struct Gates {
    agent: Option<Arc<ConnectionGate>>,
    pending: Arc<SlotTable>,
    answering: Arc<ConnectionGate>,
}

impl Gates {
    fn new(agent: Option<Arc<ConnectionGate>>) -> Gates {
        Gates {
            agent,
            pending: SlotTable::new(
                "metrics server",
                "bound on requests still arriving",
                PENDING,
                PENDING_PER_ADDRESS,
                crate::protocol::gate::DEFAULT_IPV6_PREFIX,
            ),
            answering: ConnectionGate::new(0, PER_ADDRESS),
        }
    }

    /// A place at the agent's gate and in the slots for a connection from
    /// `peer`, or why not (the places already taken are given back).
    fn admit(&self, stream: &TcpStream, peer: SocketAddr) -> Result<Places, String> {
        let mut passes = Vec::with_capacity(2);
        if let Some(gate) = &self.agent {
            passes.push(
                gate.admit(peer.ip(), Instant::now())
                    .map_err(|refusal| refusal.to_string())?,
            );
        }
        let closer = stream
            .try_clone()
            .map_err(|e| format!("no room for another connection ({e})"))?;
        let close = Box::new(move || {
            let _ = closer.shutdown(std::net::Shutdown::Both);
        });
        let (slot, dropped) = self
            .pending
            .admit(peer.ip(), close)
            .map_err(|refusal| refusal.to_string())?;
        if let Some(dropped) = dropped {
            log::warn!("{}: metrics connection closed: {}", dropped.address, dropped.why);
        }
        Ok(Places { _passes: passes, slot })
    }

    /// The place among the requests answered for `peer`'s complete request.
    fn answer(&self, peer: SocketAddr) -> Result<Pass, String> {
        self.answering.admit(peer.ip(), Instant::now()).map_err(|_| {
            format!(
                "{} already has {PER_ADDRESS} requests open on this metrics server, which answers one address \
                 on at most {PER_ADDRESS} of its {WORKERS} workers at once",
                peer.ip().to_canonical()
            )
        })
    }
}

/// Answers `status` with `text` without ever blocking (the acceptor's
/// answers: refusals, cut-offs), then the connection closes.
fn answer_at_once(stream: &TcpStream, status: u16, text: &str) {
    let _ = stream.set_nonblocking(true);
    let _ = (&*stream).write(
        format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{text}\n",
            reason_phrase(status),
            text.len() + 1
        )
        .as_bytes(),
    );
}

/// A connection whose request head is arriving.
struct Pending {
    stream: TcpStream,
    peer: SocketAddr,
    head: Vec<u8>,
    deadline: Instant,
    places: Places,
}

/// What one read of a pending head brought.
enum Progress {
    More,
    Complete,
    /// Closed, failed, or answered already.
    Gone,
}

impl Pending {
    /// Reads what has arrived, without blocking.
    fn read(&mut self) -> Progress {
        let mut chunk = [0u8; 1024];
        loop {
            match (&self.stream).read(&mut chunk) {
                Ok(0) => return Progress::Gone,
                Ok(n) => self.head.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Progress::More,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Progress::Gone,
            }
            if let Some(end) = find_head_end(&self.head) {
                self.head.truncate(end);
                return Progress::Complete;
            }
            if self.head.len() > MAX_REQUEST_BYTES {
                answer_at_once(
                    &self.stream,
                    431,
                    &format!("the request head exceeds {MAX_REQUEST_BYTES} bytes"),
                );
                return Progress::Gone;
            }
        }
    }
}

fn accept_loop(listener: TcpListener, tx: SyncSender<Admitted>, gates: &Gates, shutdown: &AtomicBool) {
    if let Err(e) = listener.set_nonblocking(true) {
        log::error!("metrics: cannot accept without blocking: {e}");
        return;
    }
    let mut pending: Vec<Pending> = Vec::new();
    while !shutdown.load(Ordering::Relaxed) {
        let now = Instant::now();
        pending.retain(|p| {
            let alive = p.deadline > now;
            if !alive {
                let seconds = REQUEST_DEADLINE.as_secs();
                answer_at_once(
                    &p.stream,
                    408,
                    &format!("the request head did not arrive within {seconds} s"),
                );
            }
            alive
        });
        let wait = pending
            .iter()
            .map(|p| p.deadline.saturating_duration_since(now))
            .fold(Duration::from_millis(200), Duration::min);
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
            .chain(pending.iter().map(|p| p.stream.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of pollfds for its length.
        let ready = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                wait.as_millis().max(1) as i32,
            )
        };
        if ready <= 0 {
            continue;
        }
        // Heads first, from the last: a removed entry is replaced by one
        // already read.
        for i in (0..pending.len()).rev() {
            if fds[i + 1].revents == 0 {
                continue;
            }
            match pending[i].read() {
                Progress::More => {}
                Progress::Gone => drop(pending.swap_remove(i)),
                Progress::Complete => {
                    let done = pending.swap_remove(i);
                    if !hand_over(done, &tx, gates) {
                        return;
                    }
                }
            }
        }
        if fds[0].revents != 0 {
            accept_all(&listener, &mut pending, gates);
        }
    }
    // Dropping the sender ends the workers once the queue is drained.
}

/// Accepts every connection waiting on `listener` into `pending`, or
/// refuses it with the reason.
fn accept_all(listener: &TcpListener, pending: &mut Vec<Pending>, gates: &Gates) {
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("metrics: accept failed: {e}");
                thread::sleep(Duration::from_millis(100));
                return;
            }
        };
        match gates.admit(&stream, peer) {
            Ok(places) if stream.set_nonblocking(true).is_ok() => pending.push(Pending {
                stream,
                peer,
                head: Vec::with_capacity(1024),
                deadline: Instant::now() + REQUEST_DEADLINE,
                places,
            }),
            Ok(_) => {}
            Err(why) => {
                log::warn!("{peer}: metrics connection refused: {why}");
                answer_at_once(&stream, 429, &why);
            }
        }
    }
}

/// Gives a complete request to the workers, or answers why not; false
/// once the workers are gone.
fn hand_over(done: Pending, tx: &SyncSender<Admitted>, gates: &Gates) -> bool {
    let Pending {
        stream,
        peer,
        head,
        places,
        ..
    } = done;
    places.slot.settle();
    let answering = match gates.answer(peer) {
        Ok(pass) => pass,
        Err(why) => {
            log::warn!("{peer}: metrics request refused: {why}");
            answer_at_once(&stream, 429, &why);
            return true;
        }
    };
    if stream.set_nonblocking(false).is_err() {
        return true;
    }
    let mut places = places;
    places._passes.push(answering);
    match tx.try_send((stream, head, places)) {
        Ok(()) => true,
        Err(TrySendError::Full((stream, _, _))) => {
            // Every worker busy and the line full: answer without blocking, close.
            answer_at_once(&stream, 503, "every worker of this metrics server is busy; try again");
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

fn worker(rx: &Mutex<Receiver<Admitted>>, routes: &Routes, probing: &AtomicUsize) {
    loop {
        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        // The places at the gates are held until the answer is written,
        // and given back before the client can see the end of it: a client
        // that reads the answer to its end and connects again at once must
        // find its place free (under load it was refused with 429 when this
        // thread had not yet run on from the close).
        let Ok((stream, head, places)) = next else { return };
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve_one(&head, routes, probing)));
        let response = answer.unwrap_or_else(|_| {
            log::error!("metrics: a request handler panicked; answered 500");
            Response::text(500, "internal error")
        });
        write_response(&stream, &response);
        drop(places);
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
}

/// A parsed request head.
#[derive(Debug, PartialEq)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
    pub accept: Option<String>,
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"))
}

pub(crate) fn parse_head(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_string())?;
    let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("malformed request line; expected 'GET /metrics HTTP/1.1'".into());
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!(
            "unsupported protocol '{}'; this server speaks HTTP/1.x",
            version.chars().take(16).collect::<String>()
        ));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut request = Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        authorization: None,
        accept: None,
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err("malformed header line (no ':')".into());
        };
        if name.eq_ignore_ascii_case("authorization") {
            request.authorization = Some(value.trim().to_string());
        } else if name.eq_ignore_ascii_case("accept") {
            request.accept = Some(value.trim().to_string());
        }
    }
    Ok(request)
}

fn serve_one(head: &[u8], routes: &Routes, probing: &AtomicUsize) -> Response {
    match parse_head(head) {
        Ok(request) => route(&request, routes, probing),
        Err(why) => Response::text(400, why),
    }
}

fn route(request: &Request, routes: &Routes, probing: &AtomicUsize) -> Response {
    if request.method != "GET" {
        let mut r = Response::text(405, "only GET is served");
        r.extra_header = Some("Allow: GET");
        return r;
    }
    match request.path.as_str() {
        "/metrics" => {
            let text = (routes.metrics)();
            if super::wants_openmetrics(request.accept.as_deref()) {
                Response {
                    status: 200,
                    content_type: super::OPENMETRICS_CONTENT_TYPE,
                    body: text,
                    extra_header: None,
                }
            } else {
                Response {
                    status: 200,
                    content_type: super::PROMETHEUS_CONTENT_TYPE,
                    body: super::to_prometheus_text(&text),
                    extra_header: None,
                }
            }
        }
        "/probe" => probe(request, routes, probing),
        "/" => Response::text(
            200,
            "nicbench metrics: GET /metrics (and /probe?target=HOST[:PORT]&workload=tcp|udp|rr when enabled)",
        ),
        _ => Response::text(404, "not found: this server serves /metrics and /probe"),
    }
}

fn probe(request: &Request, routes: &Routes, probing: &AtomicUsize) -> Response {
    let Some(handler) = &routes.probe else {
        return Response::text(404, "this agent serves no /probe: start it with --metrics-probe");
    };
    if let Some(token) = &routes.probe_token {
        if !token.accepts(request.authorization.as_deref()) {
            let mut r = Response::text(
                401,
                "/probe needs 'Authorization: Bearer TOKEN' with the agent's --metrics-token-file token",
            );
            r.extra_header = Some("WWW-Authenticate: Bearer");
            return r;
        }
    }
    let query = match ProbeQuery::parse(&request.query) {
        Ok(q) => q,
        Err(e) => return probe_error(e),
    };
    // One probe at a time: a probe is a test, and the agent runs one test.
    if probing
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return Response::text(503, "another probe is running on this agent; try again when it ends");
    }
    struct Release<'a>(&'a AtomicUsize);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.store(0, Ordering::Release);
        }
    }
    let _release = Release(probing);
    match handler(&query) {
        Ok(text) => Response {
            status: 200,
            content_type: if super::wants_openmetrics(request.accept.as_deref()) {
                super::OPENMETRICS_CONTENT_TYPE
            } else {
                super::PROMETHEUS_CONTENT_TYPE
            },
            body: if super::wants_openmetrics(request.accept.as_deref()) {
                text
            } else {
                super::to_prometheus_text(&text)
            },
            extra_header: None,
        },
        Err(e) => probe_error(e),
    }
}

fn probe_error(e: ProbeError) -> Response {
    match e {
        ProbeError::BadRequest(t) => Response::text(400, t),
        ProbeError::Busy(t) => Response::text(503, t),
        ProbeError::Internal(t) => Response::text(500, t),
    }
}

fn write_response(mut stream: &TcpStream, r: &Response) {
    let _ = stream.set_write_timeout(Some(WRITE_DEADLINE));
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        reason_phrase(r.status),
        r.content_type,
        r.body.len()
    );
    if let Some(h) = r.extra_header {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(r.body.as_bytes()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    fn server(probe: Option<ProbeHandler>, token: Option<&str>) -> MetricsServer {
        let routes = Routes {
            metrics: Box::new(|| "# HELP t_x X.\n# TYPE t_x counter\nt_x_total 3\n# EOF\n".to_string()),
            probe,
            probe_token: token.map(|t| BearerToken::new(t).unwrap()),
            gate: None,
        };
        MetricsServer::start("127.0.0.1:0".parse().unwrap(), routes).unwrap()
    }

    #[test]
    fn metrics_in_both_formats_by_accept_header() {
        let s = server(None, None);
        let plain = get(s.local_addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(plain.starts_with("HTTP/1.1 200 OK\r\n"), "{plain}");
        assert!(plain.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(plain.ends_with("# TYPE t_x_total counter\nt_x_total 3\n"), "{plain}");
        let om = get(
            s.local_addr(),
            "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
        );
        assert!(om.contains("Content-Type: application/openmetrics-text"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn bad_requests_get_clear_answers() {
        let s = server(None, None);
        let a = s.local_addr();
        assert!(get(a, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get(a, "GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(a, "garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        assert!(get(a, "\u{1}\u{2}\u{3}\r\n\r\n").starts_with("HTTP/1.1 400"));
        let probe = get(a, "GET /probe?target=x&workload=tcp HTTP/1.1\r\n\r\n");
        assert!(
            probe.starts_with("HTTP/1.1 404") && probe.contains("--metrics-probe"),
            "{probe}"
        );
        let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(100_000));
        let mut s2 = TcpStream::connect(a).unwrap();
        let _ = s2.write_all(huge.as_bytes());
        let mut out = String::new();
        let _ = s2.read_to_string(&mut out);
        assert!(out.is_empty() || out.starts_with("HTTP/1.1 431"), "{out}");
        assert!(get(a, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn the_probe_checks_its_token_and_its_query_before_the_handler_runs() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        let handler: ProbeHandler = Box::new(move |q| {
            seen.fetch_add(1, Ordering::Relaxed);
            if q.target == "panic" {
                panic!("handler bug");
            }
            Ok(format!(
                "# HELP probe_success S.\n# TYPE probe_success gauge\nprobe_success 1\n# EOF\n{}",
                ""
            ))
        });
        let s = server(Some(handler), Some("s3cret"));
        let a = s.local_addr();
        let req = |auth: &str, q: &str| get(a, &format!("GET /probe?{q} HTTP/1.1\r\n{auth}\r\n"));
        assert!(req("", "target=b&workload=tcp").starts_with("HTTP/1.1 401"));
        assert!(req("Authorization: Bearer wrong\r\n", "target=b&workload=tcp").starts_with("HTTP/1.1 401"));
        assert!(req("Authorization: Basic s3cret\r\n", "target=b&workload=tcp").starts_with("HTTP/1.1 401"));
        assert_eq!(calls.load(Ordering::Relaxed), 0);
        let bad = req("Authorization: Bearer s3cret\r\n", "target=b&workload=nope");
        assert!(
            bad.starts_with("HTTP/1.1 400") && bad.contains("unknown workload"),
            "{bad}"
        );
        assert_eq!(calls.load(Ordering::Relaxed), 0);
        let ok = req("Authorization: bearer s3cret\r\n", "target=b&workload=tcp");
        assert!(
            ok.starts_with("HTTP/1.1 200") && ok.ends_with("probe_success 1\n"),
            "{ok}"
        );
        let panicked = req("Authorization: Bearer s3cret\r\n", "target=panic&workload=tcp");
        assert!(panicked.starts_with("HTTP/1.1 500"), "{panicked}");
        assert!(req("Authorization: Bearer s3cret\r\n", "target=b&workload=rr").starts_with("HTTP/1.1 200"));
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }

    /// A connection to `addr` from the loopback address `from`.
    fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let local: SocketAddr = format!("{from}:0").parse().unwrap();
        socket.bind(&local.into()).unwrap();
        socket.connect(&addr.into()).unwrap();
        socket.into()
    }

    /// Issue 31: silent sockets from one address held every worker (503
    /// for everybody else while they were held). Issue 67: they hold no
    /// worker at all now, only places in the table of heads arriving, at
    /// most [`PENDING_PER_ADDRESS`] from one address.
    #[test]
    fn silent_clients_hold_no_worker_and_are_cut_off_at_the_deadline() {
        let s = server(None, None);
        let a = s.local_addr();
        let silent: Vec<TcpStream> = (0..=PENDING_PER_ADDRESS)
            .map(|_| connect_from("127.0.0.2", a))
            .collect();
        // Another address is answered at once, every worker free.
        assert!(get(a, "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
        let answers: Vec<String> = silent
            .into_iter()
            .map(|mut c| {
                let mut out = String::new();
                let _ = c.read_to_string(&mut out);
                out
            })
            .collect();
        let cut_off = answers.iter().filter(|o| o.starts_with("HTTP/1.1 408")).count();
        let refused: Vec<&String> = answers.iter().filter(|o| o.starts_with("HTTP/1.1 429")).collect();
        assert_eq!((cut_off, refused.len()), (PENDING_PER_ADDRESS, 1), "{answers:?}");
        assert!(
            refused[0].contains("127.0.0.2 already holds 8 connections on this agent's metrics server"),
            "{}",
            refused[0]
        );
    }

    #[test]
    fn the_agents_gate_is_passed_too() {
        let gate = ConnectionGate::new(0, 1);
        let held = gate.admit("127.0.0.2".parse().unwrap(), Instant::now()).unwrap();
        let mut routes = Routes::metrics(|| "# EOF\n".to_string());
        routes.gate = Some(Arc::clone(&gate));
        let s = MetricsServer::start("127.0.0.1:0".parse().unwrap(), routes).unwrap();
        // Refused as it connects, before it says anything.
        let mut c = connect_from("127.0.0.2", s.local_addr());
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        assert!(
            out.starts_with("HTTP/1.1 429") && out.contains("its --max-connections-per-address"),
            "{out}"
        );
        drop(held);
        let mut c = connect_from("127.0.0.2", s.local_addr());
        c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        assert!(
            out.starts_with("HTTP/1.1 200"),
            "the place given back at the agent's gate: {out}"
        );
    }

    #[test]
    fn request_heads_parse() {
        let r =
            parse_head(b"GET /probe?target=a&workload=tcp HTTP/1.1\r\nAUTHORIZATION: Bearer x\r\naccept: */*").unwrap();
        assert_eq!(r.path, "/probe");
        assert_eq!(r.query, "target=a&workload=tcp");
        assert_eq!(r.authorization.as_deref(), Some("Bearer x"));
        assert!(parse_head(b"GET / SPDY/3\r\n").is_err());
        assert!(parse_head(b"GET /\r\n").is_err());
        assert!(parse_head(b"GET / HTTP/1.1\r\nno colon").is_err());
    }

    #[test]
    fn tokens_compare_whole() {
        let t = BearerToken::new(" abc \n").unwrap();
        assert!(t.accepts(Some("Bearer abc")));
        assert!(!t.accepts(Some("Bearer abcd")));
        assert!(!t.accepts(Some("Bearer ab")));
        assert!(!t.accepts(Some("abc")));
        assert!(!t.accepts(None));
        assert!(BearerToken::new("  ").is_err());
        assert!(BearerToken::new("a b").is_err());
    }
}
