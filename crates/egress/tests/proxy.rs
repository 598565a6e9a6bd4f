//! The proxy end to end on real sockets: clients (curl, openssl s_client, raw TCP) in a
//! sandbox network namespace, the proxy's runtime in a host namespace, servers on a
//! non-loopback address (198.51.100.2) in an upstream namespace joined by a veth pair.
//! See tests/common/mod.rs. Needs root; skipped with a printed reason without it.
#![allow(clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use egress::NetworkPolicy;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A CONNECT through the proxy; the stream and the proxy's answer head.
fn tunnel(lab: &Lab, proxy: &Proxy, target: &str) -> (TcpStream, String) {
    let mut stream = lab.client(proxy.port);
    let head = ask(&mut stream, &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"));
    (stream, head)
}

fn status(head: &str) -> u16 {
    head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `openssl s_server -www` on 198.51.100.2:443 with a self-signed certificate for `names`.
fn tls_upstream(lab: &Lab, dir: &TempDir, names: &[&str]) -> (Killed, String) {
    let (cert, key) = self_signed(&dir.0, names);
    let args: Vec<String> =
        ["s_server", "-accept", &format!("{UPSTREAM_IP}:443"), "-cert", &cert, "-key", &key, "-www"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let child = lab.upstream.run(move || {
        Command::new("openssl")
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    });
    let server = Killed(child);
    let started = Instant::now();
    while lab.host.run(|| TcpStream::connect((UPSTREAM_IP, 443)).is_err()) {
        assert!(started.elapsed() < Duration::from_secs(20), "openssl s_server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, cert)
}

/// A plain-HTTP upstream on 198.51.100.2:`port`: records every byte each connection sent
/// (the head, its Content-Length body, and anything that came within 200 ms after), and
/// answers with `respond(request line)`.
fn http_upstream(lab: &Lab, port: u16, respond: fn(&str) -> String) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    serve_each(lab.upstream_listener(port), move |mut stream| {
        let mut got = Vec::new();
        let mut buffer = [0u8; 4096];
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buffer[..n]),
            }
        }
        stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        while let Ok(n) = stream.read(&mut buffer) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buffer[..n]);
        }
        let text = String::from_utf8_lossy(&got).into_owned();
        let answer = respond(text.lines().next().unwrap_or_default());
        log.lock().unwrap().push(text);
        let _ = stream.write_all(answer.as_bytes());
    });
    seen
}

/// An upstream that accepts and never sends a byte (it reads until the proxy closes).
fn silent_upstream(lab: &Lab, port: u16) {
    serve_each(lab.upstream_listener(port), |mut stream| {
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
    });
}

/// An upstream that streams zeros to every connection until it is cut.
fn endless_upstream(lab: &Lab, port: u16) {
    serve_each(lab.upstream_listener(port), |mut stream| {
        let zeros = vec![0u8; 1 << 16];
        while stream.write_all(&zeros).is_ok() {}
    });
}

fn only(records: &[egress::ConnectionRecord]) -> &egress::ConnectionRecord {
    assert_eq!(records.len(), 1, "{records:#?}");
    &records[0]
}

#[test]
fn curl_fetches_over_tls_through_connect() {
    let Some(lab) = Lab::new() else { return };
    let dir = TempDir::new("tls");
    let (_server, cert) = tls_upstream(&lab, &dir, &["repo.test"]);
    let proxy = lab.proxy(policy(&["repo.test"], &[("repo.test", UPSTREAM_IP)]));
    proxy.handle.begin_request(None);
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let out = lab.sandbox_command(
        "curl",
        &["-sS", "--max-time", "20", "--proxy", &proxy_url, "--cacert", &cert, "https://repo.test/"],
    );
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    assert!(body.contains("s_server"), "{body}");
    let records = proxy.end();
    let record = only(&records);
    assert_eq!((record.host.as_str(), record.port, record.allowed), ("repo.test", 443, true), "{record:?}");
    assert_eq!(record.address, Some(UPSTREAM_IP.parse().unwrap()));
    assert!(record.bytes_in > body.len() as u64 && record.bytes_out > 200, "{record:?}");
    assert_eq!(record.reason, None, "{record:?}");
}

#[test]
fn names_outside_the_allowlist_get_403_with_the_reason() {
    let Some(lab) = Lab::new() else { return };
    let proxy = lab.proxy(policy(&["repo.test", "*.mirror.test", "api.test:8443"], &[("repo.test", UPSTREAM_IP)]));
    proxy.handle.begin_request(None);
    let cases = [
        ("api.other.com:443", "api.other.com:443 is not in this profile's network.allow"),
        ("mirror.test:443", "mirror.test:443 is not in this profile's network.allow"),
        ("repo.test:22", "repo.test:22 is not in this profile's network.allow (it allows repo.test on port 443 only)"),
        ("api.test:443", "api.test:443 is not in this profile's network.allow (it allows api.test on port 8443 only)"),
        ("bücher.test:443", "is not in this profile's network.allow (it is not ASCII"),
    ];
    for (target, reason) in cases {
        let (mut stream, head) = tunnel(&lab, &proxy, target);
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{target}: {head}");
        assert!(header(&head, "X-Rsandbox-Denied").unwrap().contains(reason), "{target}: {head}");
        let mut body = String::new();
        stream.read_to_string(&mut body).unwrap();
        assert!(body.contains(reason), "{body}");
    }
    let records = proxy.end();
    assert_eq!(records.len(), cases.len());
    for (record, (_, reason)) in records.iter().zip(cases) {
        assert!(!record.allowed && record.address.is_none() && record.bytes_in == 0, "{record:?}");
        assert!(record.reason.as_deref().unwrap().contains(reason), "{record:?}");
    }
    assert_eq!((records[2].host.as_str(), records[2].port), ("repo.test", 22));
}

#[test]
fn ip_literals_are_denied_in_every_form() {
    let Some(lab) = Lab::new() else { return };
    // The upstream is reachable and public: only the names-only rule stops these.
    silent_upstream(&lab, 443);
    let proxy = lab.proxy(policy(&["repo.test"], &[]));
    proxy.handle.begin_request(None);
    let literals = [
        UPSTREAM_IP,
        "2130706433",
        "0177.0.0.1",
        "0x7f.0.0.1",
        "0x7f000001",
        "127.1",
        "[::ffff:127.0.0.1]",
        "[::ffff:198.51.100.2]",
        "[2001:4860:4860::8888]",
        "169.254.169.254",
    ];
    for literal in literals {
        let (_stream, head) = tunnel(&lab, &proxy, &format!("{literal}:443"));
        assert_eq!(status(&head), 403, "{literal}: {head}");
        let reason = header(&head, "X-Rsandbox-Denied").unwrap();
        assert!(reason.starts_with(&format!("{literal}:443 is not in this profile's network.allow")), "{reason}");
    }
    // The same through plain HTTP.
    let mut stream = lab.client(proxy.port);
    let head = ask(&mut stream, &format!("GET http://{UPSTREAM_IP}/ HTTP/1.1\r\nHost: {UPSTREAM_IP}\r\n\r\n"));
    assert_eq!(status(&head), 403, "{head}");
    let records = proxy.end();
    assert_eq!(records.len(), literals.len() + 1);
    assert!(records.iter().all(|r| !r.allowed && r.address.is_none()), "{records:#?}");
}

#[test]
fn every_resolved_address_is_checked_whatever_the_name() {
    let Some(lab) = Lab::new() else { return };
    silent_upstream(&lab, 443);
    let names = [
        ("loop.test", vec!["127.0.0.1"], "loop.test resolves to 127.0.0.1, a loopback address"),
        ("meta.test", vec!["169.254.169.254"], "meta.test resolves to 169.254.169.254, a link-local address"),
        ("private.test", vec!["10.0.0.1"], "private.test resolves to 10.0.0.1, a private address"),
        ("cgnat.test", vec!["100.64.0.1"], "cgnat.test resolves to 100.64.0.1, a carrier-grade NAT address"),
        ("mixed.test", vec![UPSTREAM_IP, "192.168.1.1"], "mixed.test resolves to 192.168.1.1, a private address"),
        ("mapped.test", vec!["::ffff:198.51.100.2"], "mapped.test resolves to ::ffff:198.51.100.2, an IPv4-mapped"),
        ("ula.test", vec!["fd00::1"], "ula.test resolves to fd00::1, a unique local address"),
        ("self.test", vec![HOST_IP], "self.test resolves to 198.51.100.1, one of this host's own addresses"),
    ];
    let mut rules: Vec<&str> = names.iter().map(|(name, _, _)| *name).collect();
    // Through the system resolver (/etc/hosts): localhost is 127.0.0.1.
    rules.push("localhost");
    let mut policy = policy(&rules, &[]);
    for (name, addresses, _) in &names {
        policy.hosts.insert(name.to_string(), addresses.iter().map(|a| a.parse().unwrap()).collect());
    }
    let proxy = lab.proxy(policy);
    proxy.handle.begin_request(None);
    for (name, _, reason) in &names {
        let (_stream, head) = tunnel(&lab, &proxy, &format!("{name}:443"));
        assert_eq!(status(&head), 403, "{name}: {head}");
        assert!(header(&head, "X-Rsandbox-Denied").unwrap().starts_with(reason), "{head}");
    }
    // The system resolver's part needs a `localhost` line in /etc/hosts, which a bare
    // root made by debootstrap lacks (then the name does not resolve at all: 502).
    let system_resolves_localhost = std::net::ToSocketAddrs::to_socket_addrs(&("localhost", 443)).is_ok();
    if system_resolves_localhost {
        let (_stream, head) = tunnel(&lab, &proxy, "localhost:443");
        assert_eq!(status(&head), 403, "{head}");
        assert!(header(&head, "X-Rsandbox-Denied").unwrap().contains("a loopback address"), "{head}");
    } else {
        println!("skipped the system resolver's case: this machine does not resolve localhost (no /etc/hosts line)");
    }
    let records = proxy.end();
    assert_eq!(records.len(), names.len() + usize::from(system_resolves_localhost));
    assert!(records.iter().all(|r| !r.allowed && r.address.is_none() && r.bytes_out == 0), "{records:#?}");
}

#[test]
fn the_tls_server_name_must_be_the_connect_host() {
    let Some(lab) = Lab::new() else { return };
    let dir = TempDir::new("sni");
    let (_server, _cert) = tls_upstream(&lab, &dir, &["repo.test", "mirror.test"]);
    let proxy =
        lab.proxy(policy(&["repo.test", "mirror.test"], &[("repo.test", UPSTREAM_IP), ("mirror.test", UPSTREAM_IP)]));
    let proxy_at = format!("127.0.0.1:{}", proxy.port);
    proxy.handle.begin_request(None);
    // A real client: CONNECT one allowed host, name another (allowed or not) in the SNI.
    for sni in ["mirror.test", "evil.test"] {
        let out = lab.sandbox_command(
            "openssl",
            &["s_client", "-proxy", &proxy_at, "-connect", "repo.test:443", "-servername", sni, "-brief"],
        );
        assert!(!out.status.success(), "s_client got through with SNI {sni}");
    }
    let out = lab
        .sandbox_command("openssl", &["s_client", "-proxy", &proxy_at, "-connect", "repo.test:443", "-noservername"]);
    assert!(!out.status.success(), "s_client got through without SNI");
    // The reverse: CONNECT a host that is not allowed, SNI an allowed one.
    let out = lab.sandbox_command(
        "openssl",
        &["s_client", "-proxy", &proxy_at, "-connect", "evil.test:443", "-servername", "repo.test", "-brief"],
    );
    assert!(!out.status.success());
    // The matching name goes through: a real handshake...
    let out = lab.sandbox_command(
        "openssl",
        &["s_client", "-proxy", &proxy_at, "-connect", "repo.test:443", "-servername", "repo.test", "-brief"],
    );
    assert!(out.status.success(), "s_client: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CONNECTION ESTABLISHED"), "{out:?}");
    // ... and in any case, with a trailing dot (the hand-made hello reaches the server,
    // which answers it: a handshake record or an alert).
    let (mut stream, head) = tunnel(&lab, &proxy, "REPO.test.:443");
    assert_eq!(status(&head), 200, "{head}");
    stream.write_all(&client_hello(Some("repo.TEST"))).unwrap();
    let mut answer = [0u8; 5];
    stream.read_exact(&mut answer).unwrap();
    assert!([21, 22].contains(&answer[0]) && answer[1] == 3, "not TLS from the server: {answer:?}");
    drop(stream);

    // Records are kept as connections end, so they are found by reason, not by order.
    let records = proxy.end();
    assert_eq!(records.len(), 6, "{records:#?}");
    for reason in [
        "SNI mirror.test does not match CONNECT repo.test",
        "SNI evil.test does not match CONNECT repo.test",
        "SNI (none) does not match CONNECT repo.test",
    ] {
        // Nothing of a refused hello reaches upstream.
        let found = records.iter().any(|r| r.reason.as_deref() == Some(reason) && !r.allowed && r.bytes_out == 0);
        assert!(found, "{reason}: {records:#?}");
    }
    let reason = "evil.test:443 is not in this profile's network.allow";
    assert!(records.iter().any(|r| r.reason.as_deref() == Some(reason) && !r.allowed), "{records:#?}");
    assert_eq!(records.iter().filter(|r| r.allowed && r.host == "repo.test").count(), 2, "{records:#?}");
}

#[test]
fn bytes_that_are_not_tls_after_connect_are_refused_before_reaching_upstream() {
    let Some(lab) = Lab::new() else { return };
    let answer = |_: &str| "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_string();
    let seen = [http_upstream(&lab, 443, answer), http_upstream(&lab, 8080, answer)];
    // A rule with another port still means TLS through CONNECT.
    let proxy = lab.proxy(policy(&["repo.test", "repo.test:8080"], &[("repo.test", UPSTREAM_IP)]));
    for port in [443, 8080] {
        proxy.handle.begin_request(None);
        let (mut stream, head) = tunnel(&lab, &proxy, &format!("repo.test:{port}"));
        assert_eq!(status(&head), 200, "{head}");
        stream.write_all(b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n").unwrap();
        assert_eq!(drain(&mut stream), 0, "closed without a byte from upstream");
        let records = proxy.end();
        let record = only(&records);
        assert!(!record.allowed && record.bytes_out == 0, "{record:?}");
        let reason = format!("the bytes sent after CONNECT repo.test:{port} are not a TLS ClientHello");
        assert!(record.reason.as_deref().unwrap().starts_with(&reason), "{record:?}");
    }
    for seen in seen {
        let seen = seen.lock().unwrap();
        assert!(seen.is_empty(), "upstream got {seen:?}");
    }
}

#[test]
fn plain_http_is_one_checked_request_in_origin_form() {
    let Some(lab) = Lab::new() else { return };
    let seen = http_upstream(&lab, 80, |line| {
        let body = format!("you asked {line}");
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{body}", body.len())
    });
    let proxy = lab.proxy(policy(&["repo.test:80"], &[("repo.test", UPSTREAM_IP)]));
    proxy.handle.begin_request(None);
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let out = lab.sandbox_command(
        "curl",
        &["-sS", "--max-time", "20", "--proxy", &proxy_url, "http://repo.test/src/contrib/PACKAGES?x=1"],
    );
    assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "you asked GET /src/contrib/PACKAGES?x=1 HTTP/1.1");

    // A body of its Content-Length, and a second request behind it that never leaves.
    let mut stream = lab.client(proxy.port);
    stream
        .write_all(
            b"POST http://repo.test/upload HTTP/1.1\r\nHost: REPO.test:80\r\nProxy-Authorization: Basic c2VjcmV0\r\nContent-Length: 5\r\n\r\nhelloGET http://repo.test/second HTTP/1.1\r\nHost: evil.test\r\n\r\n",
        )
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("you asked POST /upload HTTP/1.1"), "{answer}");

    // The Host header must be the target.
    for (host_line, shown) in
        [("Host: evil.test\r\n", "evil.test"), ("Host: repo.test:8080\r\n", "repo.test:8080"), ("", "(none)")]
    {
        let mut stream = lab.client(proxy.port);
        let head = ask(&mut stream, &format!("GET http://repo.test/ HTTP/1.1\r\n{host_line}\r\n"));
        assert_eq!(status(&head), 403, "{head}");
        let reason = header(&head, "X-Rsandbox-Denied").unwrap();
        assert_eq!(reason, format!("Host header {shown} does not match the request's target repo.test"));
    }
    // Port 80 is only what a rule says.
    let mut stream = lab.client(proxy.port);
    let head = ask(&mut stream, "GET http://repo.test:8080/ HTTP/1.1\r\nHost: repo.test:8080\r\n\r\n");
    assert_eq!(status(&head), 403, "{head}");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].starts_with("GET /src/contrib/PACKAGES?x=1 HTTP/1.1\r\n"), "{}", seen[0]);
    assert!(seen[0].contains("\r\nConnection: close\r\n"), "{}", seen[0]);
    assert!(!seen[0].to_ascii_lowercase().contains("proxy-"), "{}", seen[0]);
    assert!(seen[1].starts_with("POST /upload HTTP/1.1\r\n") && seen[1].ends_with("\r\n\r\nhello"), "{:?}", seen[1]);
    assert!(!seen[1].contains("c2VjcmV0") && !seen[1].contains("second"), "{:?}", seen[1]);
    drop(seen);
    let records = proxy.end();
    assert_eq!(records.len(), 6, "{records:#?}");
    let (allowed, denied): (Vec<_>, Vec<_>) = records.iter().partition(|r| r.allowed);
    assert_eq!((allowed.len(), denied.len()), (2, 4), "{records:#?}");
    assert!(allowed.iter().all(|r| r.reason.is_none() && r.bytes_in > 0 && r.bytes_out > 0), "{records:#?}");
}

#[test]
fn a_redirect_to_a_denied_host_is_a_new_request_and_denied() {
    let Some(lab) = Lab::new() else { return };
    http_upstream(&lab, 80, |_| {
        "HTTP/1.1 302 Found\r\nLocation: http://evil.test/next\r\nContent-Length: 0\r\n\r\n".into()
    });
    let proxy = lab.proxy(policy(&["repo.test:80"], &[("repo.test", UPSTREAM_IP), ("evil.test", UPSTREAM_IP)]));
    proxy.handle.begin_request(None);
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let out = lab.sandbox_command(
        "curl",
        &[
            "-sS",
            "-L",
            "--max-time",
            "20",
            "--proxy",
            &proxy_url,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{url_effective}",
            "http://repo.test/start",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "403 http://evil.test/next");
    let mut records = proxy.end();
    records.sort_by(|a, b| b.host.cmp(&a.host));
    assert_eq!(records.len(), 2, "{records:#?}");
    assert!(records[0].allowed && records[0].host == "repo.test", "{records:#?}");
    assert!(!records[1].allowed && records[1].host == "evil.test", "{records:#?}");
    assert_eq!(records[1].reason.as_deref(), Some("evil.test:80 is not in this profile's network.allow"));
}

#[test]
fn a_download_is_cut_at_max_bytes_in_for_the_whole_request() {
    let Some(lab) = Lab::new() else { return };
    endless_upstream(&lab, 443);
    let cap: u64 = 64 << 20;
    let proxy = lab.proxy(NetworkPolicy { max_bytes_in: cap, ..policy(&["repo.test"], &[("repo.test", UPSTREAM_IP)]) });
    for _request in 0..2 {
        proxy.handle.begin_request(None);
        let (mut stream, head) = tunnel(&lab, &proxy, "repo.test:443");
        assert_eq!(status(&head), 200, "{head}");
        stream.write_all(&client_hello(Some("repo.test"))).unwrap();
        assert_eq!(drain(&mut stream), cap);
        // The cap is the request's: a second connection gets nothing more.
        let (mut again, head) = tunnel(&lab, &proxy, "repo.test:443");
        assert_eq!(status(&head), 200, "{head}");
        again.write_all(&client_hello(Some("repo.test"))).unwrap();
        assert_eq!(drain(&mut again), 0);
        let mut records = proxy.end();
        records.sort_by_key(|r| std::cmp::Reverse(r.bytes_in));
        assert_eq!(records.len(), 2, "{records:#?}");
        assert_eq!(records[0].bytes_in, cap);
        assert_eq!(records[1].bytes_in, 0);
        for record in &records {
            assert_eq!(record.reason.as_deref(), Some("download over the 64 MiB network.max_bytes_in"), "{record:?}");
        }
    }
}

#[test]
fn an_upload_is_cut_at_max_bytes_out() {
    let Some(lab) = Lab::new() else { return };
    silent_upstream(&lab, 443);
    let cap: u64 = 1 << 20;
    let proxy =
        lab.proxy(NetworkPolicy { max_bytes_out: cap, ..policy(&["repo.test"], &[("repo.test", UPSTREAM_IP)]) });
    proxy.handle.begin_request(None);
    let (mut stream, head) = tunnel(&lab, &proxy, "repo.test:443");
    assert_eq!(status(&head), 200, "{head}");
    stream.write_all(&client_hello(Some("repo.test"))).unwrap();
    let chunk = vec![0u8; 1 << 16];
    let mut sent = 0u64;
    while stream.write_all(&chunk).is_ok() {
        sent += chunk.len() as u64;
        assert!(sent < 64 << 20, "the proxy kept taking bytes past the cap");
    }
    let record = proxy.end().remove(0);
    assert_eq!(record.bytes_out, cap, "{record:?}");
    assert_eq!(record.reason.as_deref(), Some("upload over the 1 MiB network.max_bytes_out"));
}

#[test]
fn a_silent_upstream_ends_at_the_idle_timeout_and_every_connection_at_the_deadline() {
    let Some(lab) = Lab::new() else { return };
    silent_upstream(&lab, 443);
    let base =
        policy(&["repo.test", "blackhole.test"], &[("repo.test", UPSTREAM_IP), ("blackhole.test", "198.51.100.3")]);
    let proxy = lab.proxy(NetworkPolicy {
        idle_timeout: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(1),
        ..base.clone()
    });
    proxy.handle.begin_request(None);
    let (mut stream, head) = tunnel(&lab, &proxy, "repo.test:443");
    assert_eq!(status(&head), 200, "{head}");
    stream.write_all(&client_hello(Some("repo.test"))).unwrap();
    assert_eq!(drain(&mut stream), 0);
    // Nobody at 198.51.100.3: the connect times out.
    let (_stream, head) = tunnel(&lab, &proxy, "blackhole.test:443");
    assert_eq!(status(&head), 504, "{head}");
    assert!(header(&head, "X-Rsandbox-Error").is_some(), "{head}");
    // A client that never sends its head, or its ClientHello, waits no longer than that.
    let mut mute = lab.client(proxy.port);
    assert!(read_head(&mut mute).starts_with("HTTP/1.1 400"));
    let (mut mute_tls, head) = tunnel(&lab, &proxy, "repo.test:443");
    assert_eq!(status(&head), 200, "{head}");
    assert_eq!(drain(&mut mute_tls), 0);

    let records = proxy.end();
    assert_eq!(records.len(), 4, "{records:#?}");
    let with = |reason: &str| {
        records.iter().find(|r| r.reason.as_deref() == Some(reason)).unwrap_or_else(|| panic!("{reason}: {records:#?}"))
    };
    assert!(with("upstream sent nothing for 1 s (network.idle_timeout)").allowed);
    let blackhole = with("blackhole.test:443 did not accept a connection within 1 s (network.connect_timeout)");
    assert!(blackhole.allowed && blackhole.address == Some("198.51.100.3".parse().unwrap()), "{blackhole:?}");
    assert!(!with("no request head within 1 s").allowed);
    assert!(!with("no TLS ClientHello within 1 s after CONNECT repo.test:443").allowed);

    let proxy = lab.proxy(base);
    proxy.handle.begin_request(Some(Instant::now() + Duration::from_secs(1)));
    let (mut stream, head) = tunnel(&lab, &proxy, "repo.test:443");
    assert_eq!(status(&head), 200, "{head}");
    stream.write_all(&client_hello(Some("repo.test"))).unwrap();
    assert_eq!(drain(&mut stream), 0);
    let record = proxy.end().remove(0);
    assert_eq!(record.reason.as_deref(), Some("closed at the request's deadline"));
    assert!(record.allowed && record.bytes_out > 0);
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_thousand_connections_at_once_are_refused_beyond_the_caps_with_bounded_descriptors() {
    let Some(lab) = Lab::new() else { return };
    silent_upstream(&lab, 443);
    let policy = NetworkPolicy {
        idle_timeout: Duration::from_secs(60),
        ..policy(&["repo.test"], &[("repo.test", UPSTREAM_IP)])
    };
    let (max_concurrent, max_connections) = (policy.max_concurrent as usize, policy.max_connections as usize);
    let proxy = lab.proxy(policy);
    proxy.handle.begin_request(None);
    let before = open_fds();
    let port = proxy.port;
    let mut clients = lab.sandbox.run(move || {
        (0..1000)
            .map(|_| {
                let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                stream.write_all(b"CONNECT repo.test:443 HTTP/1.1\r\n\r\n").unwrap();
                stream
            })
            .collect::<Vec<_>>()
    });
    let mut established = 0;
    for client in &mut clients {
        client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let head = read_head(client);
        match status(&head) {
            200 => established += 1,
            503 | 0 => {}
            other => panic!("unexpected {other}: {head}"),
        }
    }
    assert_eq!(established, max_concurrent);
    // The 16 served hold a client and an upstream socket each in the proxy, and the test's
    // upstream one more: beyond the 1000 clients' own, the count stays small.
    let held = open_fds() - before - clients.len();
    assert!(held <= 3 * max_concurrent + 16, "{held} descriptors held beyond the clients'");

    let records = proxy.end();
    assert_eq!(records.len(), max_connections + 1);
    let served: Vec<_> = records.iter().filter(|r| r.allowed).collect();
    assert_eq!(served.len(), max_concurrent);
    assert!(served.iter().all(|r| r.reason.as_deref() == Some("closed at the end of the request")), "{served:#?}");
    let at_once = "over the 16 connections at once of network.max_concurrent";
    assert_eq!(
        records.iter().filter(|r| r.reason.as_deref() == Some(at_once)).count(),
        max_connections - max_concurrent
    );
    assert_eq!(
        records.last().unwrap().reason.as_deref(),
        Some("744 more connections refused: over the 256 of network.max_connections")
    );
    drop(clients);

    // The proxy is still good for the next request.
    proxy.handle.begin_request(None);
    let (_stream, head) = tunnel(&lab, &proxy, "repo.test:443");
    assert_eq!(status(&head), 200, "{head}");
    assert_eq!(proxy.end().len(), 1);
}

#[test]
fn connections_are_served_only_during_a_request() {
    let Some(lab) = Lab::new() else { return };
    silent_upstream(&lab, 443);
    let proxy = lab.proxy(policy(&["repo.test"], &[("repo.test", UPSTREAM_IP)]));
    // Before any request: closed at once, no record.
    assert_eq!(drain(&mut lab.client(proxy.port)), 0);
    proxy.handle.begin_request(None);
    let (mut open, head) = tunnel(&lab, &proxy, "repo.test:443");
    assert_eq!(status(&head), 200, "{head}");
    open.write_all(&client_hello(Some("repo.test"))).unwrap();
    // A malformed request: 400, recorded.
    let mut stream = lab.client(proxy.port);
    let head = ask(&mut stream, "HELLO\r\n\r\n");
    assert_eq!(status(&head), 400, "{head}");
    assert!(header(&head, "X-Rsandbox-Denied").unwrap().starts_with("not an HTTP proxy request"), "{head}");
    drain(&mut stream);
    // end_request closes what is open.
    let mut records = proxy.end();
    assert_eq!(drain(&mut open), 0);
    assert_eq!(records.len(), 2, "{records:#?}");
    records.sort_by_key(|r| r.allowed);
    assert_eq!(records[1].reason.as_deref(), Some("closed at the end of the request"));
    assert!(records[1].allowed && records[1].host == "repo.test", "{records:#?}");
    assert!(!records[0].allowed && records[0].host.is_empty(), "{records:#?}");
    assert!(records[0].reason.as_deref().unwrap().starts_with("not an HTTP proxy request"), "{records:#?}");
    // After close, nothing listens.
    let port = proxy.port;
    proxy.handle.close();
    let started = Instant::now();
    while lab.sandbox.run(move || TcpStream::connect(("127.0.0.1", port)).is_ok()) {
        assert!(started.elapsed() < Duration::from_secs(5), "still accepting after close");
        std::thread::sleep(Duration::from_millis(20));
    }
}
