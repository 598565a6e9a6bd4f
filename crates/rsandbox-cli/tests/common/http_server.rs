//! `rsandbox serve --http` on a free loopback port for a test, and a std-only HTTP/1.1
//! client for it (one connection per request, `Connection: close`).

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A server process, killed when dropped.
pub struct HttpServer {
    pub child: Child,
    pub addr: String,
}

impl HttpServer {
    /// `rsandbox serve --http 127.0.0.1:0 ARGS…` with these environment variables added.
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> HttpServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rsandbox"))
            .args(["serve", "--http", "127.0.0.1:0", "--log-format", "text"])
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rsandbox serve --http starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "serve --http ended before it said where it listens");
            if let Some(url) = line.split(|c: char| c.is_whitespace() || c == '"').find(|w| w.starts_with("http://")) {
                break url.trim_start_matches("http://").trim_end_matches('/').to_string();
            }
        };
        // Keep reading its log so that the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        HttpServer { child, addr }
    }

    /// One request; the status and the JSON answer (`Value::Null` for an empty body).
    pub fn request(&self, method: &str, path: &str, token: Option<&str>, body: Option<&Value>) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let bytes = body.map(Value::to_string).unwrap_or_default();
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{bytes}",
            self.addr,
            bytes.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        assert!(!head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "a JSON answer has a length");
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a status");
        let value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
        };
        (status, value)
    }

    /// `POST path` with a JSON body, without a token.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.request("POST", path, None, Some(body))
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
