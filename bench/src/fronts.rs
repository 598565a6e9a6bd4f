//! The fronts as users reach them: `rsandbox serve --stdio` (what the R package, an
//! MCP bridge or any program speaks) and the `rsandbox` command itself.
//!
//! S1 fresh evaluation through the protocol, S2 a session's execute and one tool round
//! trip, S3 evaluations per second with requests in flight, C1 `rsandbox eval` end to
//! end (through the per-user daemon) against `Rscript`; and the child's lockdown time
//! as each sandbox measured it.

use crate::cli::Cfg;
use crate::measure::*;
use crate::report::Report;
use crate::scenarios::Peers;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// One `rsandbox serve --stdio` process and its pipes.
pub struct StdioServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// `usage.lockdown_us` of every result seen.
    pub lockdown_us: Vec<f64>,
}

impl StdioServer {
    pub fn start(cli: &Path) -> StdioServer {
        let mut child = Command::new(cli)
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("rsandbox serve --stdio starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        StdioServer { child, stdin, stdout, next_id: 1, lockdown_us: Vec::new() }
    }

    /// CPU the server's processes have used so far, in ms: the supervisor (this process,
    /// every thread), the zygote (its forks), and the sandboxes the zygote has reaped.
    pub fn cpu_ms(&self) -> [f64; 3] {
        let ticks_per_ms = rustix::param::clock_ticks_per_second() as f64 / 1000.0;
        // Fields after the command name: utime is the 12th, stime, cutime, cstime follow.
        let times = |pid: u32| -> [f64; 4] {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let fields: Vec<f64> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().skip(11).take(4).filter_map(|f| f.parse().ok()).collect())
                .unwrap_or_default();
            std::array::from_fn(|i| fields.get(i).copied().unwrap_or(0.0) / ticks_per_ms)
        };
        let supervisor = self.child.id();
        let zygote = std::fs::read_to_string(format!("/proc/{supervisor}/task/{supervisor}/children"))
            .ok()
            .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()));
        let [su, ss, _, _] = times(supervisor);
        let [zu, zs, cu, cs] = zygote.map_or([0.0; 4], times);
        [su + ss, zu + zs, cu + cs]
    }

    /// Send a request (its `id` is set here); returns the id.
    pub fn send(&mut self, mut request: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        request["id"] = json!(id);
        let mut line = request.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).expect("server stdin");
        self.stdin.flush().expect("server stdin");
        id
    }

    /// The next line from the server.
    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).expect("server stdout") > 0, "the server exited");
        let v: Value = serde_json::from_str(&line).expect("a JSON line");
        if let Some(us) = v["result"]["usage"]["lockdown_us"].as_f64() {
            self.lockdown_us.push(us);
        }
        v
    }

    /// Send and wait for the response, answering tool calls with their argument.
    pub fn call(&mut self, request: Value) -> Value {
        let id = self.send(request);
        loop {
            let v = self.recv();
            if v.get("event") == Some(&json!("tool_call")) {
                let reply = json!({"op": "tool_result", "call": v["call"], "value": v["args"]["x"]});
                let mut line = reply.to_string();
                line.push('\n');
                self.stdin.write_all(line.as_bytes()).expect("server stdin");
                self.stdin.flush().expect("server stdin");
                continue;
            }
            if v["id"] == json!(id) && v.get("event").is_none() {
                return v;
            }
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// One `rsandbox serve --http 127.0.0.1:0` process and a keep-alive connection to it.
/// The client is a few lines of HTTP/1.1 on a `TcpStream`: the row should time the
/// server, not a client library.
pub struct HttpServer {
    child: Child,
    connection: BufReader<std::net::TcpStream>,
}

impl HttpServer {
    pub fn start(cli: &Path) -> HttpServer {
        let mut child = Command::new(cli)
            .args(["serve", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rsandbox serve --http starts");
        // "rsandbox serve: listening on http://127.0.0.1:PORT" on stderr; the rest of
        // stderr (its log) is drained by a thread so the server never blocks on it.
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let address = loop {
            line.clear();
            assert!(stderr.read_line(&mut line).expect("server stderr") > 0, "rsandbox serve --http exited");
            if let Some(address) = line.trim().strip_prefix("rsandbox serve: listening on http://") {
                break address.to_string();
            }
        };
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let stream = std::net::TcpStream::connect(&address).expect("connect to serve --http");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        HttpServer { child, connection: BufReader::new(stream) }
    }

    /// `POST path` with a JSON body on the kept connection; the response's JSON body.
    pub fn post(&mut self, path: &str, body: &Value) -> Value {
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        self.connection.get_mut().write_all(request.as_bytes()).expect("write the request");
        let mut length = None;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.connection.read_line(&mut line).expect("read the response") > 0, "the server closed");
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let mut response = vec![0; length.expect("a content-length")];
        std::io::Read::read_exact(&mut self.connection, &mut response).expect("read the body");
        serde_json::from_slice(&response).expect("a JSON body")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn check(v: &Value) {
    if v["result"]["outcome"] != "ok" {
        eprintln!("rsandbox-bench: the server answered {v}");
        std::process::exit(1);
    }
}

fn timed(server: &mut StdioServer, request: Value) -> Vec<f64> {
    let t = Instant::now();
    let v = server.call(request);
    let el = ms(t.elapsed());
    check(&v);
    vec![el]
}

/// S1: a fresh sandbox per evaluation, through the protocol, against Rscript.
pub fn s1(cfg: &Cfg, report: &mut Report, peers: &Peers, cli: &Path) -> Vec<f64> {
    println!("S1: fresh evaluation of 1+1 through `rsandbox serve --stdio`");
    let mut server = StdioServer::start(cli);
    check(&server.call(json!({"op": "eval", "code": "1+1"})));
    // A client with steady traffic: each timed request comes 15 ms after the previous
    // answer, while the sandbox replacing the previous request's is being made (in the
    // row below the peer's run lies between two requests). A server of its own.
    let mut steady = StdioServer::start(cli);
    check(&steady.call(json!({"op": "eval", "code": "1+1"})));
    // The same through the HTTP front.
    let mut http = HttpServer::start(cli);
    let fresh = json!({"code": "1+1"});
    assert_eq!(http.post("/v1/eval", &fresh)["outcome"], "ok", "serve --http evaluates");
    let mut runners = vec![runner("rsandbox serve --stdio eval", true, || {
        // Untimed: let the server fork this sample's replacement, so each request
        // measures what it costs to find a waiting sandbox (S3 measures the sustained rate).
        std::thread::sleep(BETWEEN_REQUESTS);
        timed(&mut server, json!({"op": "eval", "code": "1+1"}))
    })];
    let mut every_15ms = runner("rsandbox serve --stdio eval, 15 ms after the previous answer", false, || {
        std::thread::sleep(BETWEEN_REQUESTS);
        check(&steady.call(json!({"op": "eval", "code": "1+1"})));
        std::thread::sleep(BETWEEN_REQUESTS);
        timed(&mut steady, json!({"op": "eval", "code": "1+1"}))
    });
    every_15ms.note = "two requests per round, 15 ms apart; the second is timed".into();
    runners.push(every_15ms);
    let mut over_http = runner("rsandbox serve --http POST /v1/eval", false, || {
        std::thread::sleep(BETWEEN_REQUESTS);
        let t = Instant::now();
        let v = http.post("/v1/eval", &fresh);
        let el = ms(t.elapsed());
        assert_eq!(v["outcome"], "ok", "serve --http answered {v}");
        vec![el]
    });
    over_http.note = "one kept-alive connection; like the first row, 15 ms (untimed) before each request".into();
    runners.push(over_http);
    match &peers.rscript {
        Ok(()) => {
            runners.push(runner("Rscript --vanilla", false, || vec![time_cmd(&["Rscript", "--vanilla", "-e", "1+1"])]))
        }
        Err(e) => report.skip("S1", "Rscript --vanilla", e),
    }
    interleave(report, "S1", "ms", cfg.n, runners);
    std::mem::take(&mut server.lockdown_us)
}

/// S2: a session's execute and a tool round trip through the protocol.
pub fn s2(cfg: &Cfg, report: &mut Report, cli: &Path) {
    println!("S2: session execute and tool round trip through `rsandbox serve --stdio`");
    let mut server = StdioServer::start(cli);
    let created = server.call(json!({"op": "session.create", "tools": [{"name": "echo", "args": {"x": "any"}}]}));
    let session = created["session"].as_str().expect("a session").to_string();
    let exec = |code: &str| json!({"op": "session.execute", "session": session, "code": code});
    check(&server.call(exec("echo(1)")));
    let server = std::cell::RefCell::new(server);
    let runners = vec![
        runner("rsandbox stdio session.execute", true, || timed(&mut server.borrow_mut(), exec("1+1"))),
        runner("rsandbox stdio session.execute echo(1) (tool)", false, || {
            timed(&mut server.borrow_mut(), exec("echo(1)"))
        }),
        runner("rsandbox stdio session.execute identity(1) (no call)", false, || {
            timed(&mut server.borrow_mut(), exec("identity(1)"))
        }),
    ];
    let rounds = cfg.n.max(20) + cfg.n / 2;
    interleave(report, "S2", "ms", rounds, runners);
    // In rounds of its own, after the others: one 15 ms idle slows the next several
    // requests, not only the one after it (medians of the 1st to 6th execute after
    // 15 ms idle: 642, 469, 454, 385, 375, 381 us, against about 250 back to back;
    // Python client, 200 rounds), so in the same rounds it raised the back-to-back rows
    // (the 1+1 row read 0.41 ms beside it, 0.34 ms before it was added).
    let idle = vec![runner(IDLE_EXECUTE, false, || {
        std::thread::sleep(BETWEEN_REQUESTS);
        timed(&mut server.borrow_mut(), exec("1+1"))
    })];
    interleave(report, "S2", "ms", rounds, idle);
    idle_penalty(cfg, report);
}

/// S2's execute of `1+1` when the machine has been idle before it, as before each
/// request of S1 and C1.
pub const IDLE_EXECUTE: &str = "rsandbox stdio session.execute, 15 ms (untimed) after the previous answer";
/// The untimed wait before each request of S1 and C1, which lets the server fork that
/// request's sandbox; S2's idle row and W sleep as long, to show what the wait costs.
const BETWEEN_REQUESTS: Duration = Duration::from_millis(15);

/// W: what 15 ms of idleness costs the next request on this machine, without rsandbox:
/// the same 3 000 reads at random places of 8 MiB, straight after the previous walk and
/// after 15 ms asleep. A virtual machine's idle core loses its caches (the host runs
/// others on it, or puts it in a deep sleep): S1 and C1, which wait 15 ms before each
/// request, pay this on top of the work S2 measures back to back.
fn idle_penalty(cfg: &Cfg, report: &mut Report) {
    println!("W: the machine's cost of being idle 15 ms (a memory walk, no rsandbox)");
    let memory: Vec<u64> = (0..1u64 << 20).collect();
    let mut rng = fastrand::Rng::with_seed(7);
    let places: Vec<usize> = (0..3000).map(|_| rng.usize(..memory.len())).collect();
    let walk = || {
        let t = Instant::now();
        let sum: u64 = places.iter().map(|&i| memory[i]).sum();
        std::hint::black_box(sum);
        vec![ms(t.elapsed())]
    };
    let runners = vec![
        runner(WALK, true, walk),
        runner(IDLE_WALK, false, || {
            std::thread::sleep(BETWEEN_REQUESTS);
            walk()
        }),
    ];
    interleave(report, "W", "ms", cfg.n.max(20) + cfg.n / 2, runners);
}

/// W's rows.
pub const WALK: &str = "memory walk (3 000 random reads in 8 MiB), straight after the previous one";
pub const IDLE_WALK: &str = "the same memory walk, 15 ms (untimed) after the previous one";

/// S3: evaluations per second with `c` requests in flight on one server.
pub fn s3(cfg: &Cfg, report: &mut Report, peers: &Peers, cli: &Path) -> Vec<f64> {
    let secs = cfg.p3_secs;
    let mut lockdown = Vec::new();
    for c in [2usize, 8] {
        let scenario = format!("S3 c={c}");
        println!("{scenario}: evaluations per second through `rsandbox serve --stdio`, {c} in flight, {secs:.1} s");
        let mut server = StdioServer::start(cli);
        check(&server.call(json!({"op": "eval", "code": "1+1"})));
        // Per round: CPU per evaluation of the supervisor, the zygote and the sandboxes.
        let mut cpu_per_eval: Vec<[f64; 3]> = Vec::new();
        let mut runners = vec![runner("rsandbox serve --stdio eval", true, || {
            let cpu_before = server.cpu_ms();
            let t = Instant::now();
            for _ in 0..c {
                server.send(json!({"op": "eval", "code": "1+1"}));
            }
            let mut done = 0u64;
            while t.elapsed().as_secs_f64() < secs {
                let v = server.recv();
                if v.get("event").is_none() {
                    check(&v);
                    done += 1;
                    server.send(json!({"op": "eval", "code": "1+1"}));
                }
            }
            let rate = done as f64 / t.elapsed().as_secs_f64();
            for _ in 0..c {
                while server.recv().get("event").is_some() {}
            }
            // The last sandboxes are reaped off the request path: give the zygote a moment.
            std::thread::sleep(Duration::from_millis(100));
            let cpu_after = server.cpu_ms();
            let answered = (done + c as u64) as f64;
            cpu_per_eval.push(std::array::from_fn(|i| (cpu_after[i] - cpu_before[i]) / answered));
            vec![rate]
        })];
        match &peers.rscript {
            Ok(()) => runners.push(runner("Rscript --vanilla processes", false, || {
                let t = Instant::now();
                let done = std::sync::atomic::AtomicU64::new(0);
                std::thread::scope(|s| {
                    for _ in 0..c {
                        s.spawn(|| {
                            while t.elapsed().as_secs_f64() < secs {
                                time_cmd(&["Rscript", "--vanilla", "-e", "1+1"]);
                                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        });
                    }
                });
                vec![done.into_inner() as f64 / t.elapsed().as_secs_f64()]
            })),
            Err(e) => report.skip(&scenario, "Rscript --vanilla processes", e),
        }
        interleave(report, &scenario, "evals/s", cfg.rounds, runners);
        // The warm-up batch is the first entry.
        let timed = cpu_per_eval.get(1..).unwrap_or_default();
        for (i, part) in ["supervisor (serve --stdio)", "zygote (its forks)", "sandboxes (reaped by the zygote)"]
            .into_iter()
            .enumerate()
        {
            report.add(
                &format!("{scenario} CPU"),
                &format!("rsandbox CPU per evaluation: {part}"),
                "ms",
                timed.iter().map(|round| round[i]).collect(),
                i == 0,
                "utime + stime from /proc (the sandboxes': the zygote's cutime + cstime), over the round's evaluations",
            );
        }
        lockdown.append(&mut server.lockdown_us);
    }
    lockdown
}

/// C1: the `rsandbox eval` command end to end against `Rscript -e`, interleaved; the
/// daemon (started by the untimed warm-up call) and the one-shot path.
pub fn c1(cfg: &Cfg, report: &mut Report, peers: &Peers, cli: &Path, runtime_dir: &Path) {
    println!("C1: `rsandbox eval '1+1'` end to end");
    let cli = cli.to_str().expect("a UTF-8 path").to_string();
    let env = [("XDG_RUNTIME_DIR", runtime_dir.to_str().expect("a UTF-8 path"))];
    let run = |args: &[&str]| {
        let t = Instant::now();
        let status = Command::new(&cli)
            .args(args)
            .envs(env)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("rsandbox runs");
        assert!(status.success(), "rsandbox {args:?}: {status}");
        ms(t.elapsed())
    };
    // The first call starts the daemon; wait until it answers.
    run(&["eval", "1+1"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(runtime_dir.join("rsandbox"))
        .map_or(true, |d| !d.flatten().any(|e| e.path().extension().is_some_and(|x| x == "sock")))
    {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The daemon's own answer, without the command's process: the stdio protocol on its
    // socket, one connection, 15 ms (untimed) before each request as in S1.
    let socket = std::fs::read_dir(runtime_dir.join("rsandbox"))
        .expect("the daemon's directory")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the daemon's socket");
    let stream = std::os::unix::net::UnixStream::connect(&socket).expect("connect to the daemon");
    let mut daemon = (stream.try_clone().expect("a second handle"), BufReader::new(stream));
    let mut next_id = 0;
    let mut over_socket = || {
        std::thread::sleep(BETWEEN_REQUESTS);
        next_id += 1;
        let t = Instant::now();
        let line = format!("{}\n", json!({"op": "eval", "id": next_id, "code": "1+1"}));
        daemon.0.write_all(line.as_bytes()).expect("write to the daemon");
        let mut answer = String::new();
        daemon.1.read_line(&mut answer).expect("read from the daemon");
        let el = ms(t.elapsed());
        let v: Value = serde_json::from_str(&answer).expect("a JSON line");
        check(&v);
        vec![el]
    };
    let mut runners = vec![
        runner("rsandbox eval (daemon)", true, || vec![run(&["eval", "1+1"])]),
        runner("rsandbox daemon: eval on its socket (no command process)", false, &mut over_socket),
        runner("rsandbox eval --no-daemon (starts R)", false, || vec![run(&["eval", "--no-daemon", "1+1"])]),
    ];
    match &peers.rscript {
        Ok(()) => runners
            .push(runner("Rscript --vanilla -e 1+1", false, || vec![time_cmd(&["Rscript", "--vanilla", "-e", "1+1"])])),
        Err(e) => report.skip("C1", "Rscript --vanilla -e 1+1", e),
    }
    interleave(report, "C1", "ms", cfg.n.max(12), runners);
    Command::new(&cli).args(["daemon", "--stop"]).envs(env).stderr(Stdio::null()).status().ok();
}
