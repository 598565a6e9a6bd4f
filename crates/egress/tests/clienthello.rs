//! The ClientHello reader on hand-made records: the server name across records, waiting
//! for the rest, and refusing anything that is not one clear name. (Real clients' hellos
//! are read in tests/proxy.rs: curl and openssl s_client.)
mod common;

use common::{client_hello_in_records, client_hello_with, sni_extension};
use egress::clienthello::{parse, Hello, MAX_HELLO};

#[test]
fn reads_the_server_name_across_records_and_waits_for_the_rest() {
    let whole = client_hello_in_records(Some("cloud.r-project.org"), 16);
    assert_eq!(parse(&whole), Hello::ServerName(Some("cloud.r-project.org".into())));
    for cut in [0, 3, 5, 20, whole.len() - 1] {
        assert_eq!(parse(&whole[..cut]), Hello::Incomplete, "cut at {cut}");
    }
    assert_eq!(parse(&client_hello_in_records(None, 1000)), Hello::ServerName(None));
}

#[test]
fn refuses_what_is_not_one_clear_name() {
    let two = client_hello_with(&[sni_extension("a.test"), sni_extension("b.test")], 1000);
    assert!(matches!(parse(&two), Hello::NotTls(_)));
    let ech = client_hello_with(&[sni_extension("a.test"), (0xfe0d, vec![1, 2])], 1000);
    assert!(matches!(parse(&ech), Hello::NotTls(_)));
    assert!(matches!(parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Hello::NotTls(_)));
    assert!(matches!(parse(b"SSH-2.0-OpenSSH_9.2\r\n"), Hello::NotTls(_)));
    // An extension length past the end of the hello.
    let mut bad = client_hello_with(&[sni_extension("a.test")], 1000);
    let n = bad.len();
    bad[n - 10] = 0xff;
    assert!(matches!(parse(&bad), Hello::NotTls(_)));
    // A hello claiming more than MAX_HELLO is refused without waiting for it.
    let mut huge = vec![22, 3, 1, 0x40, 0, 1, 0x10, 0, 0];
    huge.resize(5 + 0x4000, 0);
    assert!(matches!(parse(&huge), Hello::NotTls(_)), "{:?}", parse(&huge));
    const { assert!(MAX_HELLO < 0x100000) };
    // Bytes of the right first two octets never read past their end or panic.
    for len in 0..400 {
        let junk: Vec<u8> = (0..len)
            .map(|i| {
                if i == 0 {
                    22
                } else if i == 1 {
                    3
                } else {
                    (i * 37 % 251) as u8
                }
            })
            .collect();
        let _ = parse(&junk);
    }
}
