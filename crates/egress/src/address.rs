//! Which addresses a sandbox may reach: public unicast ones only, never this host's own.
//!
//! The check runs on every address a name resolves to (a name with one bad address among
//! good ones is refused whole: a resolver may hand the next client the bad one), and the
//! proxy connects only to an address it checked.

use crate::policy::{Denial, NetworkPolicy};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// What kind of forbidden address `ip` is ("a loopback address"), or `None` for a public
/// unicast address. 198.51.100.0/24 (TEST-NET-2) is deliberately *not* forbidden: the
/// tests serve their upstreams there, on a veth pair in a network namespace, since every
/// loopback and private address is refused by design. Its siblings 192.0.2.0/24 and
/// 203.0.113.0/24 are refused like any address that is not on the internet.
pub fn forbidden_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "a 'this network' address (0.0.0.0/8)"),
        ([127, 0, 0, 0], 8, "a loopback address"),
        ([10, 0, 0, 0], 8, "a private address (10.0.0.0/8)"),
        ([172, 16, 0, 0], 12, "a private address (172.16.0.0/12)"),
        ([192, 168, 0, 0], 16, "a private address (192.168.0.0/16)"),
        ([100, 64, 0, 0], 10, "a carrier-grade NAT address (100.64.0.0/10)"),
        ([169, 254, 0, 0], 16, "a link-local address (169.254.0.0/16, cloud metadata)"),
        ([192, 0, 0, 0], 24, "an IETF protocol address (192.0.0.0/24)"),
        ([192, 0, 2, 0], 24, "a documentation address (192.0.2.0/24)"),
        ([203, 0, 113, 0], 24, "a documentation address (203.0.113.0/24)"),
        ([198, 18, 0, 0], 15, "a benchmarking address (198.18.0.0/15)"),
        ([224, 0, 0, 0], 4, "a multicast address"),
        ([240, 0, 0, 0], 4, "a reserved or broadcast address (240.0.0.0/4)"),
    ];
    RANGES.iter().find(|(net, prefix, _)| in_v4(ip, *net, *prefix)).map(|(_, _, kind)| *kind)
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("the unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    // ::ffff:a.b.c.d reaches a.b.c.d through the IPv4 stack; ::a.b.c.d (deprecated
    // IPv4-compatible) too on some systems. Refused whole rather than judged by the IPv4.
    if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
        return Some("an IPv4-mapped or IPv4-compatible IPv6 address");
    }
    match s[0] {
        x if x & 0xffc0 == 0xfe80 => return Some("a link-local address (fe80::/10)"),
        x if x & 0xffc0 == 0xfec0 => return Some("a site-local address (fec0::/10)"),
        x if x & 0xfe00 == 0xfc00 => return Some("a unique local address (fc00::/7)"),
        x if x & 0xff00 == 0xff00 => return Some("a multicast address"),
        _ => {}
    }
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address that a gateway
    // reaches for us: judge that address.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return forbidden_v4(Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32));
    }
    if s[0] == 0x2002 {
        return forbidden_v4(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32));
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return Some("a documentation address (2001:db8::/32)");
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return Some("a Teredo address (2001::/32)");
    }
    if s[..4] == [0x100, 0, 0, 0] {
        return Some("a discard address (100::/64)");
    }
    None
}

/// This host's own addresses (every interface's, in the network namespace of the calling
/// thread), read fresh each time: an address the sandbox could use to reach a service
/// the host listens on.
pub fn own_addresses() -> io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocated to `head`; we free it below with
    // freeifaddrs and read it only before that.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut addresses = Vec::new();
    let mut entry = head;
    while !entry.is_null() {
        // SAFETY: `entry` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*entry };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family says its real type;
            // each cast below reads the type of that family, which the kernel sized.
            match unsafe { (*ifa.ifa_addr).sa_family } as libc::c_int {
                libc::AF_INET => {
                    // SAFETY: as above, an AF_INET sockaddr is a sockaddr_in.
                    let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    addresses.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                }
                libc::AF_INET6 => {
                    // SAFETY: as above, an AF_INET6 sockaddr is a sockaddr_in6.
                    let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    addresses.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                }
                _ => {}
            }
        }
        entry = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no reference into it remains.
    unsafe { libc::freeifaddrs(head) };
    Ok(addresses)
}

/// Resolve `host` (normalised, allowed by the policy) once and check every address:
/// the operator's `hosts` override first, else the system resolver. Blocking (getaddrinfo):
/// call it on a blocking thread. Returns the checked addresses, in the resolver's order.
pub fn resolve_checked(policy: &NetworkPolicy, host: &str, port: u16) -> Result<Vec<SocketAddr>, Denial> {
    let addresses: Vec<IpAddr> = match policy.host_override(host) {
        Some(overridden) => overridden.to_vec(),
        None => {
            let found = (host, port)
                .to_socket_addrs()
                .map_err(|e| Denial::Unresolved { host: host.to_string(), error: e.to_string() })?;
            let mut ips: Vec<IpAddr> = Vec::new();
            for addr in found {
                if !ips.contains(&addr.ip()) {
                    ips.push(addr.ip());
                }
            }
            ips
        }
    };
    if addresses.is_empty() {
        return Err(Denial::Unresolved { host: host.to_string(), error: "no address".into() });
    }
    let own = own_addresses().map_err(|e| Denial::Unresolved {
        host: host.to_string(),
        error: format!("failed to read this host's addresses (getifaddrs): {e}"),
    })?;
    for &address in &addresses {
        let kind =
            forbidden_kind(address).or_else(|| own.contains(&address).then_some("one of this host's own addresses"));
        if let Some(kind) = kind {
            return Err(Denial::ForbiddenAddress { host: host.to_string(), address, kind });
        }
    }
    Ok(addresses.into_iter().map(|ip| SocketAddr::new(ip, port)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_ranges() {
        for bad in [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.254",
            "169.254.169.254",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.2.1",
            "203.0.113.5",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "::127.0.0.1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "2001:db8::1",
        ] {
            let ip: IpAddr = bad.parse().unwrap();
            assert!(forbidden_kind(ip).is_some(), "{bad} should be forbidden");
        }
        for good in
            ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "198.51.100.2", "2a00:1450::1", "64:ff9b::808:808"]
        {
            let ip: IpAddr = good.parse().unwrap();
            assert_eq!(forbidden_kind(ip), None, "{good} should be allowed");
        }
    }

    #[test]
    fn own_addresses_include_loopback() {
        let own = own_addresses().unwrap();
        assert!(own.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{own:?}");
    }
}
