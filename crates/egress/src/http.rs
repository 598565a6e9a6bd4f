//! The request head a client sends the proxy: `CONNECT host:port` or an absolute-form
//! plain-HTTP request (`GET http://host/path HTTP/1.1`), parsed by httparse; and the
//! answers the proxy makes itself.

use crate::policy::printable;

/// Largest request head read.
pub const MAX_HEAD: usize = 16 << 10;
const MAX_HEADERS: usize = 100;

/// Plain-HTTP port when the URL names none.
pub const HTTP_PORT: u16 = 80;

/// A request head, parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel (TLS is required through it).
    Connect {
        /// The host as written (not yet checked).
        host: String,
        /// The port.
        port: u16,
    },
    /// An absolute-form plain-HTTP request, to forward in origin form.
    Forward(Forward),
}

/// A plain-HTTP request to forward.
#[derive(Debug, PartialEq, Eq)]
pub struct Forward {
    /// The URL's host as written.
    pub host: String,
    /// The URL's port (80 unless given).
    pub port: u16,
    /// The `Host` header, if any (as written).
    pub host_header: Option<String>,
    /// Bytes of body that follow the head (`Content-Length`).
    pub body_length: u64,
    /// The head to send upstream: origin-form request line, hop-by-hop headers removed,
    /// `Connection: close`.
    pub upstream_head: Vec<u8>,
}

/// Why a head is refused, and the status to answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed {
    /// 400, or 411 for a chunked request body.
    pub status: u16,
    /// In words.
    pub reason: String,
}

fn malformed(reason: impl Into<String>) -> Malformed {
    Malformed { status: 400, reason: reason.into() }
}

/// Headers that concern this hop only (RFC 9110 §7.6.1), plus the proxy's own: never
/// forwarded. `Upgrade` is among them: one request, one response, no protocol switch.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// Parse the head at the start of `bytes`: `Ok(None)` while incomplete, else the request
/// and the head's length.
pub fn parse_head(bytes: &[u8]) -> Result<Option<(Request, usize)>, Malformed> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let head_length = match request.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD => {
            return Err(malformed(format!("the request head is over {} KiB", MAX_HEAD >> 10)))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(malformed(format!("not an HTTP proxy request ({e})"))),
    };
    if head_length > MAX_HEAD {
        return Err(malformed(format!("the request head is over {} KiB", MAX_HEAD >> 10)));
    }
    let method = request.method.unwrap_or_default();
    let target = request.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target, None)?;
        return Ok(Some((Request::Connect { host, port }, head_length)));
    }
    let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
        if strip_prefix_ignore_case(target, "https://").is_some() {
            return Err(malformed("an https:// URL goes through the proxy with CONNECT, not as a plain request"));
        }
        return Err(malformed(format!(
            "{} {} is not a proxy request (the target must be an absolute http:// URL)",
            printable(method, 16),
            printable(target, 200)
        )));
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let (host, port) = split_authority(authority, Some(HTTP_PORT))?;
    let path = match path.split('#').next().unwrap_or_default() {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };

    let mut host_header = None;
    let mut body_length: Option<u64> = None;
    let mut upstream_head = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    let connection_listed: Vec<String> = request
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| {
            String::from_utf8_lossy(h.value).split(',').map(|t| t.trim().to_ascii_lowercase()).collect::<Vec<_>>()
        })
        .collect();
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        match name.as_str() {
            "host" => {
                if host_header.is_some() {
                    return Err(malformed("two Host headers"));
                }
                let value =
                    std::str::from_utf8(header.value).map_err(|_| malformed("a Host header that is not ASCII"))?;
                host_header = Some(value.trim().to_string());
            }
            "content-length" => {
                let value = std::str::from_utf8(header.value).ok().and_then(|v| v.trim().parse::<u64>().ok());
                match (value, body_length) {
                    (Some(v), None) => body_length = Some(v),
                    (Some(v), Some(prior)) if v == prior => {}
                    _ => return Err(malformed("a bad or repeated Content-Length header")),
                }
            }
            "transfer-encoding" => {
                return Err(Malformed {
                    status: 411,
                    reason: "a request body without Content-Length (chunked) is not forwarded; send its length".into(),
                })
            }
            _ => {}
        }
        if HOP_BY_HOP.contains(&name.as_str()) || connection_listed.contains(&name) {
            continue;
        }
        upstream_head.extend_from_slice(header.name.as_bytes());
        upstream_head.extend_from_slice(b": ");
        upstream_head.extend_from_slice(header.value);
        upstream_head.extend_from_slice(b"\r\n");
    }
    upstream_head.extend_from_slice(b"Connection: close\r\n\r\n");
    let forward = Forward { host, port, host_header, body_length: body_length.unwrap_or(0), upstream_head };
    Ok(Some((Request::Forward(forward), head_length)))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// `host:port` (or `host` when a default port is given). The host is returned as written
/// (an `[IPv6]` literal keeps its brackets, so the policy refuses it as an address).
pub fn split_authority(authority: &str, default_port: Option<u16>) -> Result<(String, u16), Malformed> {
    let bad = || malformed(format!("{:?} is not host:port", printable(authority, 200)));
    if authority.contains('@') {
        return Err(malformed("credentials in a proxied URL are not forwarded"));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let close = rest.find(']').ok_or_else(bad)?;
        let host = &authority[..close + 2];
        match &rest[close + 1..] {
            "" => (host, None),
            tail => (host, Some(tail.strip_prefix(':').ok_or_else(bad)?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(bad()),
        },
        Some(_) => return Err(bad()),
        None => default_port.ok_or_else(bad)?,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// The answer the proxy gives itself: a status line, `header` carrying `reason`, a short
/// text body, and `Connection: close`.
pub fn answer(status: u16, header: &str, reason: &str) -> Vec<u8> {
    let text = match status {
        200 => "Connection established",
        400 => "Bad Request",
        403 => "Forbidden",
        411 => "Length Required",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let reason = printable(reason, 1000);
    let body = format!("{reason}\n");
    format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain; charset=utf-8\r\n{header}: {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_form() {
        let input = b"CONNECT Cloud.R-project.org:443 HTTP/1.1\r\nHost: x\r\n\r\nextra";
        let (req, n) = parse_head(input).unwrap().unwrap();
        assert_eq!(req, Request::Connect { host: "Cloud.R-project.org".into(), port: 443 });
        assert_eq!(n, input.len() - "extra".len());
        let (req, _) = parse_head(b"CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n").unwrap().unwrap();
        assert_eq!(req, Request::Connect { host: "[::ffff:127.0.0.1]".into(), port: 443 });
        assert!(parse_head(b"CONNECT a.test HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"CONNECT a.test:0 HTTP/1.1\r\n\r\n").is_err());
        assert_eq!(parse_head(b"CONNECT a.test:443 HTTP/1.1\r\n").unwrap(), None);

        let head = b"GET http://Example.test:8080/src/contrib/PACKAGES?x=1#frag HTTP/1.1\r\nHost: example.test:8080\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nAccept: */*\r\n\r\n";
        let (req, _) = parse_head(head).unwrap().unwrap();
        let Request::Forward(f) = req else { panic!() };
        assert_eq!(
            (f.host.as_str(), f.port, f.host_header.as_deref()),
            ("Example.test", 8080, Some("example.test:8080"))
        );
        assert_eq!(
            String::from_utf8(f.upstream_head).unwrap(),
            "GET /src/contrib/PACKAGES?x=1 HTTP/1.1\r\nHost: example.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let (req, _) = parse_head(b"POST http://a.test HTTP/1.1\r\nContent-Length: 5\r\n\r\n").unwrap().unwrap();
        let Request::Forward(f) = req else { panic!() };
        assert_eq!((f.port, f.body_length), (80, 5));
        assert!(String::from_utf8(f.upstream_head).unwrap().starts_with("POST / HTTP/1.1\r\n"));
    }

    #[test]
    fn refusals() {
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap_err().status, 400);
        assert_eq!(parse_head(b"GET https://a.test/ HTTP/1.1\r\n\r\n").unwrap_err().status, 400);
        assert_eq!(parse_head(b"GET http://u:p@a.test/ HTTP/1.1\r\n\r\n").unwrap_err().status, 400);
        assert_eq!(
            parse_head(b"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap_err().status,
            411
        );
        let two = b"GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(parse_head(two).unwrap_err().status, 400);
        assert_eq!(parse_head(b"\x16\x03\x01\x02\x00\x01").unwrap_err().status, 400);
        let big = [b"GET http://a.test/ HTTP/1.1\r\nX: ".as_slice(), &[b'a'; MAX_HEAD]].concat();
        assert_eq!(parse_head(&big).unwrap_err().status, 400);
    }

    #[test]
    fn answers_carry_the_reason() {
        let a = String::from_utf8(answer(
            403,
            "X-Rsandbox-Denied",
            "x.test:443 is not in this profile's network.allow\r\nEvil: 1",
        ))
        .unwrap();
        assert!(a.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        assert!(a.contains("X-Rsandbox-Denied: x.test:443 is not in this profile's network.allow??Evil: 1\r\n"), "{a}");
    }
}
