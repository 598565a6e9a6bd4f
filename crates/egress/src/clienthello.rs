//! The server name (SNI) of a TLS ClientHello, read from the first bytes a client sends
//! after CONNECT (RFC 8446 §4.1.2, RFC 6066 §3). Bounded: the handshake message may span
//! several records but the whole is at most [`MAX_HELLO`] bytes; anything malformed is
//! "not TLS", never a guess.

/// Bytes of records the proxy buffers to find a whole ClientHello.
pub const MAX_HELLO: usize = 64 << 10;

const RECORD_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0;
/// Encrypted ClientHello (draft-ietf-tls-esni): the outer server name is a provider's
/// public name and the real one is hidden, so the SNI check would check nothing.
const EXT_ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;

/// What the bytes so far say.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// A ClientHello has begun; more bytes are needed.
    Incomplete,
    /// Not a TLS ClientHello (why, in words).
    NotTls(&'static str),
    /// A whole ClientHello, with its one host name if it has one.
    ServerName(Option<String>),
}

/// Read a ClientHello from the start of `bytes`.
pub fn parse(bytes: &[u8]) -> Hello {
    // Gather the handshake layer from consecutive handshake records.
    let mut handshake = Vec::new();
    let mut rest = bytes;
    loop {
        if rest.len() < 5 {
            return if bytes.len() >= MAX_HELLO {
                Hello::NotTls("the ClientHello is too large")
            } else {
                Hello::Incomplete
            };
        }
        if rest[0] != RECORD_HANDSHAKE || rest[1] != 3 {
            return Hello::NotTls("not a TLS handshake record");
        }
        let length = u16::from_be_bytes([rest[3], rest[4]]) as usize;
        if length == 0 || length > 1 << 14 {
            return Hello::NotTls("a TLS record of an impossible length");
        }
        if rest.len() < 5 + length {
            return if bytes.len() >= MAX_HELLO {
                Hello::NotTls("the ClientHello is too large")
            } else {
                Hello::Incomplete
            };
        }
        handshake.extend_from_slice(&rest[5..5 + length]);
        rest = &rest[5 + length..];
        if handshake.len() >= 4 {
            if handshake[0] != HANDSHAKE_CLIENT_HELLO {
                return Hello::NotTls("the first handshake message is not a ClientHello");
            }
            let body_length = u32::from_be_bytes([0, handshake[1], handshake[2], handshake[3]]) as usize;
            if 4 + body_length > MAX_HELLO {
                return Hello::NotTls("the ClientHello is too large");
            }
            if handshake.len() >= 4 + body_length {
                return match server_name(&handshake[4..4 + body_length]) {
                    Ok(name) => Hello::ServerName(name),
                    Err(why) => Hello::NotTls(why),
                };
            }
        }
    }
}

/// A cursor over a ClientHello body that fails instead of reading past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("a truncated ClientHello");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<usize, &'static str> {
        Ok(self.take(1)?[0] as usize)
    }
    fn u16(&mut self) -> Result<usize, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    fn vec8(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u16()?;
        self.take(n)
    }
}

fn server_name(body: &[u8]) -> Result<Option<String>, &'static str> {
    let mut hello = Reader(body);
    let version = hello.take(2)?;
    if version[0] != 3 {
        return Err("a ClientHello of an unknown version");
    }
    hello.take(32)?; // random
    hello.vec8()?; // legacy session id
    hello.vec16()?; // cipher suites
    hello.vec8()?; // compression methods
    if hello.0.is_empty() {
        return Ok(None); // no extensions at all (TLS 1.0 style): no server name
    }
    let mut extensions = Reader(hello.vec16()?);
    let mut name = None;
    let mut seen_server_name = false;
    while !extensions.0.is_empty() {
        let kind = extensions.u16()? as u16;
        let data = extensions.vec16()?;
        match kind {
            EXT_SERVER_NAME => {
                if seen_server_name {
                    return Err("a ClientHello with two server_name extensions");
                }
                seen_server_name = true;
                name = host_name(data)?;
            }
            EXT_ENCRYPTED_CLIENT_HELLO => return Err("an encrypted ClientHello (ECH hides the server name)"),
            _ => {}
        }
    }
    Ok(name)
}

/// The one `host_name` entry of a server_name extension.
fn host_name(data: &[u8]) -> Result<Option<String>, &'static str> {
    let mut outer = Reader(data);
    let mut list = Reader(outer.vec16()?);
    let mut found = None;
    while !list.0.is_empty() {
        let name_type = list.u8()?;
        let name = list.vec16()?;
        if name_type == 0 {
            if found.is_some() {
                return Err("a server_name extension with two host names");
            }
            let name = std::str::from_utf8(name).map_err(|_| "a server name that is not ASCII")?;
            if !name.is_ascii() || name.is_empty() {
                return Err("a server name that is not ASCII");
            }
            found = Some(name.to_string());
        }
    }
    Ok(found)
}
