//! A CRAN-like repository over HTTPS on a test host that never leaves this machine: a
//! network namespace made for the test (a `python3` server is its only process, so the
//! namespace, its veth pair and the host's end of it vanish when the server is killed),
//! joined to the host's namespace by a veth pair on a /30 of TEST-NET-2
//! (198.51.100.0/24, which the proxy does not refuse: loopback and private ranges it
//! does, by design). The server holds a certificate for `cran.test` signed by a CA made
//! for the run (`openssl`), and serves `src/contrib/PACKAGES` and a tiny source package
//! built with `R CMD build`, plus the paths the attack corpus needs: `/redirect-to/HOST`
//! (a 302 to `https://HOST/`), `/endless` (bytes until the client goes), `/silent` (a
//! response that never starts), and for the bench's download scenario `/bytes/N` (N
//! bytes with their `Content-Length`, made in memory: no file of that size on disk).
//!
//! The sandbox trusts the CA through `CURL_CA_BUNDLE` (set by the R code; the CA file is
//! in a directory the profile makes readable). Root only: [`CranServer::start`] returns
//! `None` with the reason printed otherwise.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test host's name.
pub const CRAN_HOST: &str = "cran.test";

/// The running repository.
pub struct CranServer {
    /// Where the CA, the repository and the server's files are (0755, readable by any
    /// sandbox uid).
    pub dir: PathBuf,
    /// The CA certificate R must trust (`CURL_CA_BUNDLE`).
    pub ca: PathBuf,
    /// The server's address (in `hosts`, for `cran.test`).
    pub address: String,
    server: Child,
}

const SERVER_PY: &str = r#"
import http.server, os, socket, ssl, sys, time
address, directory = sys.argv[1], sys.argv[2]

class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=directory, **kwargs)
    def log_message(self, *args):
        pass
    def do_GET(self):
        if self.path.startswith("/redirect-to/"):
            self.send_response(302)
            self.send_header("Location", "https://" + self.path[len("/redirect-to/"):] + "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            block = b"x" * 65536
            try:
                while True:
                    self.wfile.write(block)
            except OSError:
                pass
        elif self.path.startswith("/bytes/") and self.path[len("/bytes/"):].isdigit():
            left = int(self.path[len("/bytes/"):])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(left))
            self.end_headers()
            # 64 KiB per write: python's ssl reaches a few hundred MB/s with blocks this size.
            block = memoryview(b"x" * 65536)
            try:
                while left > 0:
                    n = min(left, len(block))
                    self.wfile.write(block[:n])
                    left -= n
            except OSError:
                pass
        elif self.path == "/silent":
            time.sleep(3600)
        else:
            super().do_GET()

# The address appears once the test has configured the veth end: retry until then.
deadline = time.time() + 20
while True:
    try:
        server = http.server.ThreadingHTTPServer((address, 443), Handler)
        break
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(0.05)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.path.join(directory, "..", "server.pem"), os.path.join(directory, "..", "server.key"))
server.socket = context.wrap_socket(server.socket, server_side=True)
print("ready", flush=True)
# A test process that ends without dropping its fixture (a static) leaves no server.
import threading
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
server.serve_forever()
"#;

fn run(program: &str, args: &[&str], dir: &Path) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e} (scripts/install-deps.sh installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Every directory 0755 and file 0644 below `dir`: a sandbox's uid reads them.
fn open_up(dir: &Path) {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            open_up(&path);
        } else {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

impl CranServer {
    /// Build the repository and start its server; `None` (printed why) when not root.
    pub fn start() -> Option<CranServer> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: the CRAN test host needs root (a network namespace and a veth pair)");
            return None;
        }
        let pid = std::process::id();
        // One /30 per test process: two test binaries running at once get two subnets.
        let slot = 1 + pid % 60;
        let (host_ip, address) = (format!("198.51.100.{}", slot * 4 + 1), format!("198.51.100.{}", slot * 4 + 2));
        // Directories of earlier test processes that are gone (a static fixture is never
        // dropped; its server ends with its process).
        for entry in fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(other) = name.strip_prefix("rsandbox-cran-") {
                if other.parse::<u32>().is_ok() && !Path::new("/proc").join(other).exists() {
                    let _ = fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = std::env::temp_dir().join(format!("rsandbox-cran-{pid}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("repo/src/contrib")).unwrap();
        // The CA and the server's certificate for cran.test (SAN), signed by it.
        let san = dir.join("san.cnf");
        write(&san, &format!("subjectAltName=DNS:{CRAN_HOST}\n"));
        run(
            "openssl",
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=rsandbox test CA",
            ],
            &dir,
        );
        run(
            "openssl",
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                &format!("/CN={CRAN_HOST}"),
            ],
            &dir,
        );
        run(
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-extfile",
                "san.cnf",
            ],
            &dir,
        );
        // A tiny source package, built and indexed as CRAN does.
        let package = dir.join("build/tinypkg");
        write(&package.join("DESCRIPTION"), "Package: tinypkg\nVersion: 0.1.0\nTitle: A Tiny Package\nDescription: Says hello from the test repository.\nAuthor: rsandbox tests\nMaintainer: rsandbox tests <tests@example.org>\nLicense: MIT\n");
        write(&package.join("NAMESPACE"), "export(hello)\n");
        write(&package.join("R/hello.R"), "hello <- function() \"hello from tinypkg\"\n");
        run(
            "R",
            &["CMD", "build", "--no-manual", "--no-build-vignettes", &package.to_string_lossy()],
            &dir.join("repo/src/contrib"),
        );
        run(
            "Rscript",
            &["--vanilla", "-e", "tools::write_PACKAGES('.', type = 'source')"],
            &dir.join("repo/src/contrib"),
        );
        open_up(&dir);
        // The server, alone in a new network namespace (unshare execs it: same pid).
        let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        write(&dir.join("server.py"), SERVER_PY);
        let mut server = Command::new("unshare")
            .args([
                "--net",
                python,
                &dir.join("server.py").to_string_lossy(),
                &address,
                &dir.join("repo").to_string_lossy(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("unshare --net python3");
        let (host_end, far_end) = (format!("rsbc{pid}h"), format!("rsbc{pid}u"));
        let netns = format!("/proc/{}/ns/net", server.id());
        // Wait until unshare has exec'd python in its own namespace.
        let own = fs::read_link("/proc/self/ns/net").unwrap();
        let start = Instant::now();
        while fs::read_link(&netns).map_or(true, |ns| ns == own) {
            assert!(start.elapsed() < Duration::from_secs(10), "the server never got its network namespace");
            std::thread::sleep(Duration::from_millis(10));
        }
        let script = format!(
            "ip link add {host_end} type veth peer name {far_end} netns {server_pid} && \
             ip addr add {host_ip}/30 dev {host_end} && ip link set {host_end} up && \
             nsenter --net={netns} sh -c 'ip link set lo up && ip addr add {address}/30 dev {far_end} && ip link set {far_end} up'",
            server_pid = server.id()
        );
        let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        if !out.status.success() {
            let _ = server.kill();
            panic!("setting up the veth pair failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        // "ready" once it listens with TLS.
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the repository's server did not start");
        Some(CranServer { ca: dir.join("ca.pem"), dir, address, server })
    }

    /// A profile file (in the server's directory) extending `extends`, allowing
    /// `allow` with `cran.test` (and `extra_hosts`) pinned to their addresses.
    pub fn profile(
        &self,
        name: &str,
        extends: &str,
        allow: &[&str],
        extra_hosts: &[(&str, &str)],
        extra: &str,
    ) -> PathBuf {
        let allow: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
        let mut hosts = vec![format!("{CRAN_HOST:?} = {:?}", self.address)];
        hosts.extend(extra_hosts.iter().map(|(name, address)| format!("{name:?} = {address:?}")));
        let text = format!(
            "extends = {extends:?}\nread = [{dir:?}]\n\n[network]\nallow = [{allow}]\nhosts = {{ {hosts} }}\n{extra}",
            dir = self.dir.to_string_lossy(),
            allow = allow.join(", "),
            hosts = hosts.join(", "),
        );
        let path = self.dir.join(format!("{name}.toml"));
        write(&path, &text);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    /// R code that makes R trust the test CA.
    pub fn trust_ca(&self) -> String {
        format!("Sys.setenv(CURL_CA_BUNDLE = {:?})\n", self.ca.to_string_lossy())
    }
}

impl Drop for CranServer {
    fn drop(&mut self) {
        // Its namespace, the veth pair and the host's end go with it.
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
