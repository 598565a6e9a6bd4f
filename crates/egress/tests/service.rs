//! The service's contract with the engine, without root: what `serve` accepts, and that
//! the runtime may be started, used and dropped from inside another runtime (the servers'
//! fronts are async).
use egress::{Egress, NetworkPolicy};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;

#[test]
fn serve_refuses_what_is_not_a_listening_tcp_socket_or_a_workable_policy() {
    let egress = Egress::start().unwrap();
    let policy = Arc::new(NetworkPolicy::default());
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let error = egress.serve(udp.into(), policy.clone()).err().expect("a UDP socket is refused");
    assert_eq!(error.to_string(), "the egress listener is not a listening TCP socket");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let connected = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let error = egress.serve(connected.into(), policy).err().expect("a connected socket is refused");
    assert_eq!(error.to_string(), "the egress listener is not a listening TCP socket");
    let zero = Arc::new(NetworkPolicy { max_connections: 0, ..NetworkPolicy::default() });
    let error = egress.serve(listener.into(), zero).err().expect("a policy that refuses everything is refused");
    assert_eq!(error.to_string(), "network.max_connections must be above 0");
}

#[test]
fn the_service_lives_and_dies_inside_another_runtime() {
    let outer = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    outer.block_on(async {
        let egress = Egress::start().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let policy = NetworkPolicy::allowing(["repo.test".parse().unwrap()]);
        let handle = egress.serve(listener.into(), Arc::new(policy)).unwrap();
        handle.begin_request(None);
        let answer = tokio::task::spawn_blocking(move || {
            let mut client = TcpStream::connect(address).unwrap();
            client.write_all(b"CONNECT other.test:443 HTTP/1.1\r\n\r\n").unwrap();
            let mut answer = String::new();
            client.read_to_string(&mut answer).unwrap();
            answer
        })
        .await
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        let records = handle.end_request();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].reason.as_deref(), Some("other.test:443 is not in this profile's network.allow"));
        drop(handle);
        drop(egress);
    });
}
