//! The figure for the bench: a 512 MiB download through the proxy (CONNECT tunnel, the
//! sandbox's loopback, the proxy's copy, the veth) against the same download straight over
//! the veth pair, on the same machine. Printed, never asserted (performance is measured,
//! not asserted). Run it in release:
//!
//! ```text
//! cargo test --release -p rsandbox-egress --test throughput -- --ignored --nocapture
//! ```
mod common;

use common::*;
use egress::NetworkPolicy;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

const SIZE: u64 = 512 << 20;
const ROUNDS: usize = 5;

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn proxied_download_against_direct() {
    let Some(lab) = Lab::new() else { return };
    serve_each(lab.upstream_listener(443), |mut stream| {
        // Take the client's hello first and its close last: a socket closed with unread
        // bytes resets, and the reset would cut the download short.
        let mut hello = [0u8; 4096];
        let _ = stream.read(&mut hello);
        let zeros = vec![0u8; 1 << 16];
        let mut left = SIZE;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            if stream.write_all(&zeros[..n]).is_err() {
                return;
            }
            left -= n as u64;
        }
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = stream.read(&mut hello);
    });
    let proxy =
        lab.proxy(NetworkPolicy { max_bytes_in: 4 * SIZE, ..policy(&["repo.test"], &[("repo.test", UPSTREAM_IP)]) });
    let mb_per_s = |bytes: u64, started: Instant| bytes as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64();
    let (mut directs, mut proxieds) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let started = Instant::now();
        let mut direct = lab.host.run(|| TcpStream::connect((UPSTREAM_IP, 443)).unwrap());
        direct.write_all(&client_hello(Some("repo.test"))).unwrap();
        let bytes = drain(&mut direct);
        assert_eq!(bytes, SIZE);
        let direct_rate = mb_per_s(bytes, started);

        proxy.handle.begin_request(None);
        let started = Instant::now();
        let mut stream = lab.client(proxy.port);
        let head = ask(&mut stream, "CONNECT repo.test:443 HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        stream.write_all(&client_hello(Some("repo.test"))).unwrap();
        let bytes = drain(&mut stream);
        assert_eq!(bytes, SIZE);
        let proxied_rate = mb_per_s(bytes, started);
        let records = proxy.handle.end_request();
        assert_eq!(records[0].bytes_in, SIZE);
        println!(
            "round {round}: 512 MiB direct {direct_rate:.0} MB/s, through the egress proxy {proxied_rate:.0} MB/s ({:.0}%)",
            100.0 * proxied_rate / direct_rate
        );
        directs.push(direct_rate);
        proxieds.push(proxied_rate);
    }
    let median = |rates: &mut Vec<f64>| {
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    };
    let (direct, proxied) = (median(&mut directs), median(&mut proxieds));
    println!(
        "median of {ROUNDS}: direct {direct:.0} MB/s, through the egress proxy {proxied:.0} MB/s ({:.0}%)",
        100.0 * proxied / direct
    );
}
