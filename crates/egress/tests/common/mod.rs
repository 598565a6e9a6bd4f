//! A lab of three network namespaces per test, on threads of the test process (a thread
//! that unshares CLONE_NEWNET is alone in its namespace, and so is everything it starts:
//! threads, runtimes, `curl`):
//!
//! - `host`: the supervisor's side; the proxy's runtime is started there. Its veth end is
//!   198.51.100.1 (one of "the host's own addresses").
//! - `upstream`: the internet; servers listen on 198.51.100.2 (TEST-NET-2, which the proxy
//!   deliberately allows, as loopback and private addresses are refused by design).
//! - `sandbox`: where the proxy's listener is made (127.0.0.1) and clients run.
//!
//! Nothing is named or left behind: the namespaces end with their threads. Needs root
//! (CAP_NET_ADMIN); without it `Lab::new` prints why and returns `None`.
#![allow(dead_code, clippy::undocumented_unsafe_blocks)]

use egress::{ConnectionRecord, Egress, EgressHandle, NetworkPolicy};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

pub const HOST_IP: &str = "198.51.100.1";
pub const UPSTREAM_IP: &str = "198.51.100.2";

type Job = Box<dyn FnOnce() + Send>;

/// A thread alone in a fresh network namespace, running the closures it is given.
pub struct NsThread {
    jobs: Option<mpsc::Sender<Job>>,
    tid: i32,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NsThread {
    fn new(name: &str) -> NsThread {
        let (jobs, receive) = mpsc::channel::<Job>();
        let (tid_tx, tid_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                // SAFETY: integer-only system call; it moves only this thread, which
                // exists to live in the new namespace.
                let unshared = unsafe { libc::unshare(libc::CLONE_NEWNET) };
                assert_eq!(unshared, 0, "unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error());
                // SAFETY: gettid cannot fail.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                for job in receive {
                    job();
                }
            })
            .unwrap();
        let tid = tid_rx.recv().unwrap();
        NsThread { jobs: Some(jobs), tid, thread: Some(thread) }
    }

    /// Run `f` in this namespace and return its result (panics are passed on).
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> R {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .as_ref()
            .unwrap()
            .send(Box::new(move || {
                let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
            }))
            .unwrap();
        match rx.recv().unwrap() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Start `f` in this namespace without waiting (a server).
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        self.jobs
            .as_ref()
            .unwrap()
            .send(Box::new(move || {
                std::thread::spawn(f);
            }))
            .unwrap();
    }

    /// Run a shell command here; it must succeed.
    pub fn sh(&self, script: &str) {
        let script = script.to_string();
        self.run(move || {
            let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
            assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
        })
    }
}

impl Drop for NsThread {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub struct Lab {
    pub host: NsThread,
    pub upstream: NsThread,
    pub sandbox: NsThread,
}

impl Lab {
    pub fn new() -> Option<Lab> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: the egress lab needs root (network namespaces and a veth pair)");
            return None;
        }
        let lab = Lab {
            host: NsThread::new("lab-host"),
            upstream: NsThread::new("lab-upstream"),
            sandbox: NsThread::new("lab-sandbox"),
        };
        lab.host.sh(&format!(
            "ip link set lo up && ip link add eg0 type veth peer name eg1 netns {} && ip addr add {HOST_IP}/24 dev eg0 && ip link set eg0 up",
            lab.upstream.tid
        ));
        lab.upstream.sh(&format!("ip link set lo up && ip addr add {UPSTREAM_IP}/24 dev eg1 && ip link set eg1 up"));
        lab.sandbox.sh("ip link set lo up");
        Some(lab)
    }

    /// Start a proxy in `host` serving a listener made in `sandbox`, under `policy`.
    pub fn proxy(&self, policy: NetworkPolicy) -> Proxy {
        let egress = self.host.run(|| Egress::start().unwrap());
        let listener = self.sandbox.run(|| TcpListener::bind("127.0.0.1:0").unwrap());
        let port = listener.local_addr().unwrap().port();
        let handle = egress.serve(listener.into(), Arc::new(policy)).unwrap();
        Proxy { handle, port, egress }
    }

    /// A TCP listener on the upstream address.
    pub fn upstream_listener(&self, port: u16) -> TcpListener {
        self.upstream.run(move || TcpListener::bind((UPSTREAM_IP, port)).unwrap())
    }

    /// Run a command in the sandbox namespace; its output.
    pub fn sandbox_command(&self, program: &str, args: &[&str]) -> std::process::Output {
        let program = program.to_string();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        self.sandbox.run(move || Command::new(program).args(args).output().unwrap())
    }

    /// A client connection to the proxy, from the sandbox.
    pub fn client(&self, proxy_port: u16) -> TcpStream {
        let stream = self.sandbox.run(move || TcpStream::connect(("127.0.0.1", proxy_port)).unwrap());
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream
    }
}

pub struct Proxy {
    pub handle: EgressHandle,
    pub port: u16,
    pub egress: Egress,
}

impl Proxy {
    pub fn end(&self) -> Vec<ConnectionRecord> {
        self.handle.end_request()
    }
}

/// A policy allowing `rules`, with `hosts` overrides `name=address`.
pub fn policy(rules: &[&str], hosts: &[(&str, &str)]) -> NetworkPolicy {
    let mut policy = NetworkPolicy::allowing(rules.iter().map(|r| r.parse().unwrap()));
    for (name, address) in hosts {
        policy.hosts.entry(name.to_string()).or_default().push(address.parse().unwrap());
    }
    policy
}

/// Send a request head and read the proxy's answer head (up to the blank line).
pub fn ask(stream: &mut TcpStream, head: &str) -> String {
    stream.write_all(head.as_bytes()).unwrap();
    read_head(stream)
}

/// Read an HTTP head byte by byte (so nothing after it is consumed).
pub fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// The value of a header in a head.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A TLS ClientHello (structure only: the proxy reads, never answers, the handshake)
/// naming `server_name`, if any, as one record.
pub fn client_hello(server_name: Option<&str>) -> Vec<u8> {
    client_hello_in_records(server_name, 1 << 14)
}

/// The same, split into records of at most `record_size` bytes.
pub fn client_hello_in_records(server_name: Option<&str>, record_size: usize) -> Vec<u8> {
    let mut extensions: Vec<(u16, Vec<u8>)> = vec![(10, vec![0, 2, 0, 29])];
    if let Some(name) = server_name {
        extensions.push(sni_extension(name));
    }
    client_hello_with(&extensions, record_size)
}

pub fn sni_extension(name: &str) -> (u16, Vec<u8>) {
    let mut entry = vec![0];
    entry.extend((name.len() as u16).to_be_bytes());
    entry.extend(name.as_bytes());
    let mut data = (entry.len() as u16).to_be_bytes().to_vec();
    data.extend(entry);
    (0, data)
}

/// A ClientHello with these extensions, framed in records of at most `record_size` bytes.
pub fn client_hello_with(extensions: &[(u16, Vec<u8>)], record_size: usize) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.push(0);
    body.extend([0, 2, 0x13, 0x01]);
    body.extend([1, 0]);
    let mut ext = Vec::new();
    for (kind, data) in extensions {
        ext.extend(kind.to_be_bytes());
        ext.extend((data.len() as u16).to_be_bytes());
        ext.extend(data);
    }
    body.extend((ext.len() as u16).to_be_bytes());
    body.extend(ext);
    let mut handshake = vec![1];
    handshake.extend(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend(body);
    let mut out = Vec::new();
    for chunk in handshake.chunks(record_size) {
        out.extend([22, 3, 1]);
        out.extend((chunk.len() as u16).to_be_bytes());
        out.extend(chunk);
    }
    out
}

/// Read until EOF or error; how many bytes.
pub fn drain(stream: &mut TcpStream) -> u64 {
    let mut buffer = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n as u64,
        }
    }
}

/// An upstream that accepts and, per connection, runs `serve` on its own thread.
pub fn serve_each(listener: TcpListener, serve: impl Fn(TcpStream) + Send + Sync + 'static) {
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream));
        }
    });
}

/// A self-signed certificate for these names, as (cert path, key path) in a temp dir.
pub fn self_signed(dir: &std::path::Path, names: &[&str]) -> (String, String) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let san = names.iter().map(|n| format!("DNS:{n}")).collect::<Vec<_>>().join(",");
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", &format!("/CN={}", names[0]), "-addext", &format!("subjectAltName={san}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
    (cert.display().to_string(), key.display().to_string())
}

/// A fresh temporary directory, removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "egress-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
