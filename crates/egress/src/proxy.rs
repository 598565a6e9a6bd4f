//! The proxy service: one small tokio runtime per engine, one accept loop per sandbox
//! listener, one task per connection. Every connection is checked against the policy,
//! counted against the request's caps, and ends with the request.

use crate::address::resolve_checked;
use crate::clienthello::{self, Hello};
use crate::http::{self, Forward, Request};
use crate::policy::{normalize_host, printable, Denial, NetworkPolicy};
use crate::record::ConnectionRecord;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Header of every refusal the proxy answers itself (403, 400, 411, 503): the reason, in
/// the R user's words.
pub const DENIED_HEADER: &str = "X-Rsandbox-Denied";
/// Header of the proxy's own 502/504 answers (the policy allowed the host, it could not
/// be reached).
pub const ERROR_HEADER: &str = "X-Rsandbox-Error";

/// Longest wait for a request head, and for the ClientHello after CONNECT (or the idle
/// timeout, if shorter).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait in [`EgressHandle::end_request`] for connections to finish closing (they
/// are cancelled, so this is only a bound against a bug, never a normal wait).
const END_WAIT: Duration = Duration::from_secs(5);
/// Relay buffer, each direction.
const BUFFER: usize = 64 << 10;

/// The proxy service of one engine: owns a small tokio runtime (two workers) that serves
/// the listeners of all its sandboxes.
pub struct Egress {
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Egress {
    /// Start the runtime.
    pub fn start() -> io::Result<Egress> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rsandbox-egress")
            .enable_all()
            .build()?;
        Ok(Egress { runtime: Some(runtime) })
    }

    /// Serve `listener` (a listening TCP socket, typically made in a sandbox's network
    /// namespace and passed out of it) under `policy`. Connections are served only between
    /// [`EgressHandle::begin_request`] and [`EgressHandle::end_request`]; at other times
    /// they are closed as soon as accepted.
    pub fn serve(&self, listener: OwnedFd, policy: Arc<NetworkPolicy>) -> io::Result<EgressHandle> {
        policy.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        ensure_listening(&listener)?;
        let runtime = self.runtime.as_ref().expect("runtime present until drop");
        let listener = std::net::TcpListener::from(listener);
        listener.set_nonblocking(true)?;
        let listener = {
            let _context = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let shared = Arc::new(Shared {
            policy,
            state: Mutex::new(RequestState::idle()),
            live: Mutex::new(0),
            live_changed: Condvar::new(),
        });
        let closed = CancellationToken::new();
        runtime.spawn(accept_loop(listener, shared.clone(), closed.clone()));
        Ok(EgressHandle { shared, closed })
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        // Never blocks, so an engine may be dropped inside another runtime (the servers').
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Refuse a socket that is not a listening TCP socket: the engine's mistake, said at once
/// rather than as an accept error later.
fn ensure_listening(fd: &OwnedFd) -> io::Result<()> {
    let query = |option: libc::c_int| -> io::Result<libc::c_int> {
        let mut value: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `length` bytes to `value`, an int we own, and
        // the fd is borrowed from a live OwnedFd.
        match unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&mut value as *mut libc::c_int).cast(),
                &mut length,
            )
        } {
            0 => Ok(value),
            _ => Err(io::Error::last_os_error()),
        }
    };
    let not_listener =
        || io::Error::new(io::ErrorKind::InvalidInput, "the egress listener is not a listening TCP socket");
    if query(libc::SO_ACCEPTCONN).map_err(|_| not_listener())? == 0 || query(libc::SO_TYPE)? != libc::SOCK_STREAM {
        return Err(not_listener());
    }
    if ![libc::AF_INET, libc::AF_INET6].contains(&query(libc::SO_DOMAIN)?) {
        return Err(not_listener());
    }
    Ok(())
}

/// State shared by the handle, the accept loop and the connection tasks.
struct Shared {
    policy: Arc<NetworkPolicy>,
    state: Mutex<RequestState>,
    /// Connection tasks alive (served, not refused); `end_request` waits for zero.
    live: Mutex<usize>,
    live_changed: Condvar,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, RequestState> {
        // A panic elsewhere leaves the counters usable; never turn it into a second panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn live(&self) -> MutexGuard<'_, usize> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What is spent of one request's caps, shared by its connections.
struct Budget {
    generation: u64,
    cancel: CancellationToken,
    deadline: Option<tokio::time::Instant>,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

struct RequestState {
    active: bool,
    generation: u64,
    budget: Arc<Budget>,
    records: Vec<ConnectionRecord>,
    /// Connections accepted during this request.
    accepted: u64,
    /// Connections served at this moment.
    concurrent: u32,
}

impl RequestState {
    fn idle() -> RequestState {
        RequestState {
            active: false,
            generation: 0,
            budget: Arc::new(Budget {
                generation: 0,
                cancel: CancellationToken::new(),
                deadline: None,
                bytes_in: AtomicU64::new(0),
                bytes_out: AtomicU64::new(0),
            }),
            records: Vec::new(),
            accepted: 0,
            concurrent: 0,
        }
    }
}

/// One listener being served. Dropping it (or [`EgressHandle::close`]) stops accepting
/// and closes every connection.
pub struct EgressHandle {
    shared: Arc<Shared>,
    closed: CancellationToken,
}

impl EgressHandle {
    /// Serve connections from now until [`EgressHandle::end_request`]; every connection
    /// ends at `deadline`, if given. Byte and connection caps start afresh.
    pub fn begin_request(&self, deadline: Option<Instant>) {
        let mut state = self.shared.state();
        state.budget.cancel.cancel();
        state.generation += 1;
        state.active = true;
        state.accepted = 0;
        state.records.clear();
        state.budget = Arc::new(Budget {
            generation: state.generation,
            cancel: CancellationToken::new(),
            deadline: deadline.map(tokio::time::Instant::from_std),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
        });
    }

    /// Stop serving, close every open connection (the sandbox is stopped between
    /// requests) and return this request's records: one per connection, at most
    /// `max_connections`, plus one summarising the connections refused beyond.
    pub fn end_request(&self) -> Vec<ConnectionRecord> {
        let (generation, beyond) = {
            let mut state = self.shared.state();
            state.active = false;
            state.budget.cancel.cancel();
            let max = u64::from(self.shared.policy.max_connections);
            (state.generation, state.accepted.saturating_sub(max))
        };
        // Cancelled tasks finish at their next poll; wait for their records.
        let waited = Instant::now();
        let mut live = self.shared.live();
        while *live > 0 && waited.elapsed() < END_WAIT {
            live = self.shared.live_changed.wait_timeout(live, END_WAIT / 50).unwrap_or_else(|p| p.into_inner()).0;
        }
        drop(live);
        let mut state = self.shared.state();
        let mut records = std::mem::take(&mut state.records);
        if beyond > 0 && state.generation == generation {
            records.push(ConnectionRecord::unread_refused(format!(
                "{beyond} more connections refused: over the {} of network.max_connections",
                self.shared.policy.max_connections
            )));
        }
        records
    }

    /// Stop accepting and close every connection (as dropping the handle does).
    pub fn close(self) {}
}

impl Drop for EgressHandle {
    fn drop(&mut self) {
        self.closed.cancel();
        let mut state = self.shared.state();
        state.active = false;
        state.budget.cancel.cancel();
    }
}

/// What the accept loop does with a new connection.
enum Admission {
    /// Outside a request: close it, no record.
    Close,
    /// Refuse with a 503 (the record, if any, is already kept).
    Refuse(String),
    /// Serve it within this request's budget.
    Serve(Arc<Budget>),
}

fn admit(shared: &Shared) -> Admission {
    let policy = &shared.policy;
    let mut state = shared.state();
    if !state.active {
        return Admission::Close;
    }
    state.accepted += 1;
    if state.accepted > u64::from(policy.max_connections) {
        // Summarised in one record at end_request.
        return Admission::Refuse(format!(
            "over the {} connections of network.max_connections for this request",
            policy.max_connections
        ));
    }
    if state.concurrent >= policy.max_concurrent {
        let reason = format!("over the {} connections at once of network.max_concurrent", policy.max_concurrent);
        state.records.push(ConnectionRecord::unread_refused(reason.clone()));
        return Admission::Refuse(reason);
    }
    state.concurrent += 1;
    *shared.live() += 1;
    Admission::Serve(state.budget.clone())
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, closed: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = closed.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted || e.kind() == io::ErrorKind::Interrupted => {
                continue
            }
            Err(_) => {
                // Out of descriptors or memory: the pending connections wait in the
                // backlog; retry shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match admit(&shared) {
            Admission::Close => drop(stream),
            Admission::Refuse(reason) => refuse_now(stream, &reason),
            Admission::Serve(budget) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let _live = LiveGuard(shared.clone());
                    serve_connection(stream, &shared, &budget).await;
                });
            }
        }
    }
}

/// Answer 503 without waiting for anything (a refused connection must not hold a
/// descriptor): read what the client already sent, so closing does not reset the answer
/// away, write the answer into the empty send buffer, close.
fn refuse_now(stream: TcpStream, reason: &str) {
    let mut scratch = [0u8; 4096];
    for _ in 0..16 {
        if !matches!(stream.try_read(&mut scratch), Ok(n) if n > 0) {
            break;
        }
    }
    let _ = stream.try_write(&http::answer(503, DENIED_HEADER, reason));
}

/// Counts a served connection down when its task ends, however it ends.
struct LiveGuard(Arc<Shared>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.state().concurrent -= 1;
        *self.0.live() -= 1;
        self.0.live_changed.notify_all();
    }
}

/// One connection as it is being served: what its record will say.
struct Connection<'a> {
    /// Shared, so a blocking lookup can hold it without a copy.
    policy: &'a Arc<NetworkPolicy>,
    budget: &'a Budget,
    /// What it will say (its duration and reason are set at its end).
    record: ConnectionRecord,
    /// The sandbox closed its side of a tunnel: it is done with the connection, so a request
    /// that ends before upstream closes its side has not cut anything.
    client_closed: bool,
}

/// How a connection ended early.
type Ended = Option<String>;

async fn serve_connection(client: TcpStream, shared: &Shared, budget: &Budget) {
    let started = Instant::now();
    let mut connection =
        Connection { policy: &shared.policy, budget, record: ConnectionRecord::unread(), client_closed: false };
    let deadline = async {
        match budget.deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    let (reason, cut_from_outside) = tokio::select! {
        // The connection first: a close the sandbox already made is read before a cut.
        biased;
        reason = handle(client, &mut connection) => (reason, false),
        _ = budget.cancel.cancelled() => (Some("closed at the end of the request".to_string()), true),
        _ = deadline => (Some("closed at the request's deadline".to_string()), true),
    };
    let reason = if cut_from_outside && connection.client_closed { None } else { reason };
    let record = ConnectionRecord {
        duration_ms: started.elapsed().as_millis().try_into().unwrap_or(u64::MAX),
        reason,
        ..connection.record
    };
    let mut state = shared.state();
    if state.generation == budget.generation {
        state.records.push(record);
    }
}

/// Serve one connection to its end; the reason it ended early, if it did.
async fn handle(mut client: TcpStream, connection: &mut Connection<'_>) -> Ended {
    let head_timeout = HEAD_TIMEOUT.min(connection.policy.idle_timeout);
    let mut buffer = Vec::with_capacity(4096);
    let parsed = tokio::time::timeout(head_timeout, async {
        loop {
            match http::parse_head(&buffer) {
                Ok(None) => {}
                other => return Ok(other),
            }
            let mut chunk = [0u8; 4096];
            let want = (http::MAX_HEAD + 1 - buffer.len()).min(chunk.len());
            match client.read(&mut chunk[..want]).await {
                Ok(0) => return Err("the client closed before its request head was complete".to_string()),
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("reading the request head failed: {e}")),
            }
        }
    })
    .await;
    let (request, head_length) = match parsed {
        Err(_) => {
            let reason = format!("no request head within {} s", head_timeout.as_secs_f64());
            return refuse(&mut client, 400, &reason).await;
        }
        Ok(Err(reason)) => return Some(reason),
        Ok(Ok(Err(malformed))) => return refuse(&mut client, malformed.status, &malformed.reason).await,
        Ok(Ok(Ok(Some(parsed)))) => parsed,
        Ok(Ok(Ok(None))) => unreachable!("the loop returns only a complete head or an error"),
    };
    let rest = buffer.split_off(head_length);
    match request {
        Request::Connect { host, port } => connect(client, connection, host, port, rest).await,
        Request::Forward(forward) => forward_plain(client, connection, forward, rest).await,
    }
}

/// Answer a refusal and end the connection with that reason.
async fn refuse(client: &mut TcpStream, status: u16, reason: &str) -> Ended {
    let header = if status == 502 || status == 504 { ERROR_HEADER } else { DENIED_HEADER };
    let _ = client.write_all(&http::answer(status, header, reason)).await;
    let _ = client.shutdown().await;
    Some(reason.to_string())
}

/// The policy's decision on `host:port` and the upstream connection to the address it
/// checked, or the refusal to answer.
async fn open_upstream(connection: &mut Connection<'_>, host: &str, port: u16) -> Result<TcpStream, (u16, String)> {
    connection.record.host = printable(host, 255);
    connection.record.port = port;
    let policy = connection.policy;
    policy.check_host(host, port).map_err(|denial| (403, denial.to_string()))?;
    let name = normalize_host(host).expect("check_host accepted the name");
    connection.record.host = name.clone();
    let resolving = {
        let policy = Arc::clone(policy);
        let name = name.clone();
        tokio::task::spawn_blocking(move || resolve_checked(&policy, &name, port))
    };
    let timeout = policy.connect_timeout;
    let addresses = match tokio::time::timeout(timeout, resolving).await {
        Err(_) => {
            return Err((
                504,
                format!("{name} was not resolved within {} s (network.connect_timeout)", timeout.as_secs_f64()),
            ))
        }
        Ok(Err(join)) => return Err((502, format!("resolving {name} failed: {join}"))),
        Ok(Ok(Err(denial @ Denial::ForbiddenAddress { .. }))) => return Err((403, denial.to_string())),
        Ok(Ok(Err(denial))) => return Err((502, denial.to_string())),
        Ok(Ok(Ok(addresses))) => addresses,
    };
    connection.record.allowed = true;
    match tokio::time::timeout(timeout, connect_first(&addresses, connection)).await {
        Err(_) => Err((
            504,
            format!(
                "{name}:{port} did not accept a connection within {} s (network.connect_timeout)",
                timeout.as_secs_f64()
            ),
        )),
        Ok(Err(e)) => Err((502, format!("could not connect to {name}:{port}: {e}"))),
        Ok(Ok(upstream)) => Ok(upstream),
    }
}

/// Connect to the checked addresses in order (never a new lookup).
async fn connect_first(addresses: &[SocketAddr], connection: &mut Connection<'_>) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for &address in addresses {
        connection.record.address = Some(address.ip());
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// CONNECT: check, connect, answer 200, then require a ClientHello naming the CONNECT
/// host before relaying a byte of it. (A CONNECT to another port of an allowed host:port
/// rule requires TLS too: plain HTTP goes through the absolute-form path, where the proxy
/// sees the Host header.)
async fn connect(
    mut client: TcpStream,
    connection: &mut Connection<'_>,
    host: String,
    port: u16,
    mut hello: Vec<u8>,
) -> Ended {
    let mut upstream = match open_upstream(connection, &host, port).await {
        Ok(upstream) => upstream,
        Err((status, reason)) => return refuse(&mut client, status, &reason).await,
    };
    if let Err(e) = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await {
        return Some(format!("the client went away: {e}"));
    }
    let head_timeout = HEAD_TIMEOUT.min(connection.policy.idle_timeout);
    let read_hello = async {
        let mut chunk = vec![0u8; 16 << 10];
        loop {
            match clienthello::parse(&hello) {
                Hello::Incomplete => {}
                other => return Ok(other),
            }
            let want = (clienthello::MAX_HELLO - hello.len()).min(chunk.len());
            match client.read(&mut chunk[..want]).await {
                Ok(0) => return Err("the client closed before its TLS ClientHello was complete".to_string()),
                Ok(n) => hello.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("reading the TLS ClientHello failed: {e}")),
            }
        }
    };
    let name = connection.record.host.clone();
    let denied = match tokio::time::timeout(head_timeout, read_hello).await {
        Err(_) => {
            Some(format!("no TLS ClientHello within {} s after CONNECT {name}:{port}", head_timeout.as_secs_f64()))
        }
        Ok(Err(reason)) => Some(reason),
        Ok(Ok(Hello::NotTls(why))) => Some(format!("{} ({why})", Denial::NotTls { host: name.clone(), port })),
        Ok(Ok(Hello::ServerName(sni))) => match sni.as_deref().map(normalize_host) {
            Some(Ok(sni)) if sni == name => None,
            _ => Some(
                Denial::SniMismatch { sni: sni.map_or("(none)".into(), |s| printable(&s, 255)), host: name.clone() }
                    .to_string(),
            ),
        },
        Ok(Ok(Hello::Incomplete)) => unreachable!("the loop returns only a whole ClientHello or an error"),
    };
    if let Some(reason) = denied {
        connection.record.allowed = false;
        return Some(reason);
    }
    relay(&mut client, &mut upstream, connection, hello, None).await
}

/// Plain HTTP: one request per connection, its `Host` header the target's, forwarded in
/// origin form with `Connection: close`, its body exactly `Content-Length` bytes.
async fn forward_plain(
    mut client: TcpStream,
    connection: &mut Connection<'_>,
    forward: Forward,
    mut body: Vec<u8>,
) -> Ended {
    connection.record.host = printable(&forward.host, 255);
    connection.record.port = forward.port;
    if let Err(denial) = connection.policy.check_host(&forward.host, forward.port) {
        return refuse(&mut client, 403, &denial.to_string()).await;
    }
    let target = normalize_host(&forward.host).expect("check_host accepted the name");
    let header_matches = forward.host_header.as_deref().is_some_and(|header| {
        http::split_authority(header, Some(http::HTTP_PORT))
            .ok()
            .and_then(|(host, port)| Some((normalize_host(&host).ok()?, port)))
            .is_some_and(|(host, port)| host == target && port == forward.port)
    });
    if !header_matches {
        let header = forward.host_header.as_deref().map_or("(none)".to_string(), |h| printable(h, 255));
        return refuse(&mut client, 403, &Denial::HostHeaderMismatch { header, host: target }.to_string()).await;
    }
    let mut upstream = match open_upstream(connection, &forward.host, forward.port).await {
        Ok(upstream) => upstream,
        Err((status, reason)) => return refuse(&mut client, status, &reason).await,
    };
    // Bytes past the body are a second request: never forwarded.
    body.truncate(forward.body_length.try_into().unwrap_or(usize::MAX));
    let body_left = forward.body_length - body.len() as u64;
    let mut first = forward.upstream_head;
    first.extend_from_slice(&body);
    relay(&mut client, &mut upstream, connection, first, Some(body_left)).await
}

/// Sizes in the words of a cap: "64 MiB", "512 KiB", "1000 bytes".
fn size_words(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Take up to `wanted` bytes of a request-wide cap; how many were granted.
fn take_budget(spent: &AtomicU64, cap: u64, wanted: u64) -> u64 {
    let before = spent.fetch_add(wanted, Ordering::Relaxed);
    let granted = cap.saturating_sub(before).min(wanted);
    if granted < wanted {
        // Keep the counter at the cap, so later connections see it spent, not overflown.
        spent.fetch_sub(wanted - granted, Ordering::Relaxed);
    }
    granted
}

/// Why [`pass_on`] stopped.
enum Cut {
    /// The request's cap is spent (what it granted was written).
    Cap,
    /// The write failed.
    Write(io::Error),
}

/// Write `bytes` within a request-wide cap (`spent` of `cap`): only what the budget grants
/// is written and added to `counted`; the rest cuts the connection.
async fn pass_on(
    writer: &mut (impl AsyncWrite + Unpin),
    bytes: &[u8],
    spent: &AtomicU64,
    cap: u64,
    counted: &mut u64,
) -> Result<(), Cut> {
    let granted = take_budget(spent, cap, bytes.len() as u64) as usize;
    writer.write_all(&bytes[..granted]).await.map_err(Cut::Write)?;
    *counted += granted as u64;
    if granted < bytes.len() {
        return Err(Cut::Cap);
    }
    Ok(())
}

/// Send `first` upstream, then copy both ways, counting against the request's caps,
/// until upstream closes (the end of a tunnel or of a plain response) or a cap, the idle
/// timeout or an error ends it. `client_limit`: bytes still to take from the client
/// (plain HTTP's body), unlimited for a tunnel.
async fn relay(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    connection: &mut Connection<'_>,
    first: Vec<u8>,
    client_limit: Option<u64>,
) -> Ended {
    let policy = connection.policy;
    let budget = connection.budget;
    let outward = |cut: Cut| match cut {
        Cut::Cap => format!("upload over the {} network.max_bytes_out", size_words(policy.max_bytes_out)),
        Cut::Write(e) => format!("writing upstream failed: {e}"),
    };
    let inward = |cut: Cut| match cut {
        Cut::Cap => format!("download over the {} network.max_bytes_in", size_words(policy.max_bytes_in)),
        Cut::Write(e) => format!("writing to the sandbox failed: {e}"),
    };

    let sent =
        pass_on(upstream, &first, &budget.bytes_out, policy.max_bytes_out, &mut connection.record.bytes_out).await;
    if let Err(cut) = sent {
        return Some(outward(cut));
    }

    let (mut client_read, mut client_write) = client.split();
    let (mut upstream_read, mut upstream_write) = upstream.split();
    let mut up = vec![0u8; BUFFER];
    let mut down = vec![0u8; BUFFER];
    let mut client_left = client_limit.unwrap_or(u64::MAX);
    let mut reading_client = client_left > 0;
    let idle = policy.idle_timeout;
    let mut silent_until = tokio::time::Instant::now() + idle;
    loop {
        tokio::select! {
            read = client_read.read(&mut up[..(client_left.min(BUFFER as u64) as usize).max(1)]), if reading_client => {
                let n = match read {
                    Ok(0) => {
                        // The client is done sending: pass its half-close on.
                        reading_client = false;
                        connection.client_closed = client_limit.is_none();
                        let _ = upstream_write.shutdown().await;
                        continue;
                    }
                    Ok(n) => n,
                    Err(e) => return Some(format!("reading from the sandbox failed: {e}")),
                };
                client_left -= n as u64;
                reading_client = client_left > 0;
                let (spent, cap, counted) = (&budget.bytes_out, policy.max_bytes_out, &mut connection.record.bytes_out);
                let sent = pass_on(&mut upstream_write, &up[..n], spent, cap, counted).await;
                if let Err(cut) = sent {
                    return Some(outward(cut));
                }
            }
            read = upstream_read.read(&mut down) => {
                let n = match read {
                    Ok(0) => {
                        let _ = client_write.shutdown().await;
                        return None;
                    }
                    Ok(n) => n,
                    Err(e) => return Some(format!("reading upstream failed: {e}")),
                };
                silent_until = tokio::time::Instant::now() + idle;
                let (spent, cap, counted) = (&budget.bytes_in, policy.max_bytes_in, &mut connection.record.bytes_in);
                let sent = pass_on(&mut client_write, &down[..n], spent, cap, counted).await;
                if let Err(cut) = sent {
                    return Some(inward(cut));
                }
            }
            _ = tokio::time::sleep_until(silent_until) => {
                return Some(format!("upstream sent nothing for {} s (network.idle_timeout)", idle.as_secs_f64()));
            }
        }
    }
}
