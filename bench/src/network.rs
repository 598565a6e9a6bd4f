//! Scenario N (issue #27): one large file downloaded over HTTPS from a test host on this
//! machine, through a sandbox's egress proxy against straight from the host, in MB/s.
//!
//! The test host is the CLI tests' own (`crates/rsandbox-cli/tests/common/cran.rs`): a
//! python HTTPS server alone in a network namespace, joined by a veth pair on TEST-NET-2,
//! with a certificate for `cran.test` from a CA made for the run. Its `/bytes/N` serves N
//! bytes made in memory.
//!
//! Both systems run the same R code (`download.file(..., method = "libcurl")` into
//! `tempfile()`, timed inside R by `system.time`, so R's start is not counted):
//! - proxied: `Engine::eval` in a sandbox whose profile allows `cran.test` and pins its
//!   address in `hosts`; libcurl tunnels through the supervisor's proxy (CONNECT, SNI
//!   check, the copy in both directions, the veth);
//! - direct: `Rscript --vanilla` on the host, in a private mount namespace (`unshare
//!   --mount`) where a copy of `/etc/hosts` with a `cran.test` line is bound over the
//!   machine's, so the machine's file is never touched. This keeps the URL, the SNI and
//!   the certificate check the same as the proxied download's (an IP URL would need a
//!   certificate for the address and would send no SNI); only the path differs. R's
//!   `TMPDIR` there is a fresh tmpfs, as the sandbox's workspace is.

#[allow(dead_code)] // The CLI tests' fixture: the bench uses part of it.
#[path = "../../crates/rsandbox-cli/tests/common/cran.rs"]
mod cran;

use crate::cli::Cfg;
use crate::measure::{check_ok, descendants, interleave, log_file, runner, works};
use crate::report::{stats, Report};
use crate::scenarios::{eval_opts, Peers};
use cran::{CranServer, CRAN_HOST};
use rsandbox::profile::Profile;
use rsandbox::{Engine, EngineConfig, EvalOptions};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The scenario's id.
pub const SCENARIO: &str = "N";
/// The row of the download through the sandbox's proxy (the scenario's baseline).
pub const PROXIED: &str = "rsandbox Engine::eval download.file through the egress proxy";
/// The row of the same download straight from the host.
pub const DIRECT: &str = "Rscript --vanilla download.file direct";

/// Proxy variables a host environment may carry: the direct download must not use them.
const PROXY_VARS: [&str; 8] =
    ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"];

/// Run in the private mount namespace: the hosts copy over `/etc/hosts`, a tmpfs for R's
/// temporary files, then R. Arguments: hosts copy, tmpfs directory, tmpfs size, R code.
const DIRECT_SH: &str = "mount --bind \"$1\" /etc/hosts && mount -t tmpfs -o size=\"$3\" rsandbox-bench \"$2\" && \
                         TMPDIR=\"$2\" exec Rscript --vanilla -e \"$4\"";

/// Whether this machine can run the test host: root, `ip`, `openssl`, `python3`,
/// `unshare` and `nsenter`. `Err` says what is missing.
pub fn test_host_ready() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the test host needs root (a network namespace, a veth pair, a private mount namespace)".into());
    }
    for argv in [["ip", "-V"], ["openssl", "version"], ["python3", "--version"], ["unshare", "-V"], ["nsenter", "-V"]] {
        works(&argv).map_err(|e| format!("{e} (scripts/install-deps.sh installs it)"))?;
    }
    Ok(())
}

/// MB/s (MB = 2^20 bytes, as the bench's memory figures and the egress throughput test).
fn rate(bytes: u64, seconds: f64) -> f64 {
    // system.time counts milliseconds: a tiny file may take "0".
    bytes as f64 / f64::from(1 << 20) / seconds.max(0.001)
}

/// The test server's process: the python3 under this one running the fixture's script.
fn server_pid(cran: &CranServer) -> Option<u32> {
    let script = cran.dir.join("server.py");
    let script = script.to_string_lossy();
    descendants(std::process::id()).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == script.as_bytes()))
    })
}

/// CPU seconds a process has used, its ended threads included (`utime + stime` of
/// `/proc/PID/stat`): the server answers each request on a thread of its own.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis start at field 3; utime is 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| ticks as f64 / per_second as f64)
}

/// One download by `once` (its elapsed seconds), as MB/s; with the server's pid, also
/// the fraction of the download the server was on a CPU, pushed to `busy`.
fn sample(bytes: u64, server: Option<u32>, busy: &mut Vec<f64>, once: impl FnOnce() -> f64) -> Vec<f64> {
    let before = server.and_then(cpu_seconds);
    let seconds = once();
    if let (Some(before), Some(after)) = (before, server.and_then(cpu_seconds)) {
        busy.push((after - before) / seconds.max(0.001));
    }
    vec![rate(bytes, seconds)]
}

/// The R code both systems run; its value is the download's elapsed seconds.
fn download_code(cran: &CranServer, bytes: u64) -> String {
    let url = format!("https://{CRAN_HOST}/bytes/{bytes}");
    format!(
        "{trust}f <- tempfile()\n\
         t <- system.time(download.file({url:?}, f, method = \"libcurl\", quiet = TRUE))[[\"elapsed\"]]\n\
         stopifnot(file.size(f) == {bytes})\n\
         unlink(f)\n\
         t\n",
        trust = cran.trust_ca()
    )
}

fn fail(what: &str, detail: &str) -> ! {
    eprintln!("rsandbox-bench: {SCENARIO}: {what}: {detail}");
    std::process::exit(1);
}

/// The sandbox's download: its elapsed seconds, after checking that the proxy carried it
/// (a record of `cran.test` at the test host's address with every byte).
fn proxied_once(engine: &Engine, options: &EvalOptions, code: &str, cran: &CranServer, bytes: u64) -> f64 {
    let r = engine.eval(code, options).unwrap_or_else(|e| fail("the sandbox's download", &e.to_string()));
    check_ok("the sandbox's download", &r);
    let carried: u64 = r
        .network
        .iter()
        .filter(|c| c.allowed && c.host == CRAN_HOST && c.address.map(|a| a.to_string()) == Some(cran.address.clone()))
        .map(|c| c.bytes_in)
        .sum();
    if carried < bytes {
        fail("the sandbox's download", &format!("the proxy carried {carried} bytes of {bytes}: {:?}", r.network));
    }
    r.value
        .as_f64()
        .or_else(|| r.value.get(0).and_then(|v| v.as_f64()))
        .unwrap_or_else(|| fail("the sandbox's download", &format!("no elapsed time in {}", r.value)))
}

/// The host's download: its elapsed seconds, as R printed them.
fn direct_once(cfg: &Cfg, code: &str, hosts: &Path, tmp: &Path, tmp_size: u64) -> f64 {
    let code = format!("{code}cat(sprintf(\"%.3f\\n\", t))\n");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "sh", "-c", DIRECT_SH, "sh"])
        .arg(hosts)
        .arg(tmp)
        .arg(tmp_size.to_string())
        .arg(&code)
        .stdin(Stdio::null())
        .stderr(log_file(cfg));
    for var in PROXY_VARS {
        command.env_remove(var);
    }
    let out = command.output().unwrap_or_else(|e| fail("the direct download", &format!("cannot run unshare: {e}")));
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        fail("the direct download", &format!("{} (R's stderr is in {})", out.status, cfg.log.display()));
    }
    stdout
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| fail("the direct download", &format!("no elapsed time in {stdout:?}")))
}

/// What scenario N measures, for the results' notes.
pub fn note(cfg: &Cfg) -> String {
    format!(
        "N: one {} MiB file over HTTPS from a test host on this machine (a python server in its own network \
         namespace, behind a veth pair), downloaded by the same R code (download.file, method libcurl, into \
         tempfile(), timed inside R with system.time, so R's start is not counted): in a sandbox through the egress \
         proxy (CONNECT, SNI check, the proxy's copy) and by Rscript on the host straight over the veth (cran.test \
         resolved by a private copy of /etc/hosts); MB = 2^20 bytes. The server is one python thread writing 64 KiB \
         TLS blocks; each row's note gives the share of the download it was on a CPU (near 100%: the server was the \
         limit). On 2 shared cores other load moves both rates: the ratio proxied/direct is the figure that matters.",
        cfg.download_bytes >> 20
    )
}

/// Scenario N: the proxied and the direct download, interleaved, `cfg.downloads` each.
pub fn download(cfg: &Cfg, report: &mut Report, peers: &Peers) {
    let bytes = cfg.download_bytes;
    let mib = bytes >> 20;
    println!("{SCENARIO}: a {mib} MiB download over HTTPS, through the egress proxy and direct");
    if let Err(e) = &peers.test_host {
        report.skip(SCENARIO, "all systems", e);
        return;
    }
    let cran = match std::panic::catch_unwind(CranServer::start) {
        Ok(Some(cran)) => cran,
        Ok(None) => return report.skip(SCENARIO, "all systems", "the test host needs root"),
        Err(_) => return report.skip(SCENARIO, "all systems", "the test host did not start (its error is above)"),
    };
    let code = download_code(&cran, bytes);
    // Room for the file and R's own temporary files, in the workspace and the direct tmpfs.
    let room = bytes + (64 << 20);

    let max_download = format!("max_download = \"{}M\"\n", 2 * mib + 16);
    let profile_path = cran.profile("bench-download", "strict", &[CRAN_HOST], &[], &max_download);
    let profile =
        Profile::load(&profile_path.to_string_lossy()).unwrap_or_else(|e| fail("the download profile", &e.to_string()));
    let engine = Engine::start(EngineConfig { profile, ..EngineConfig::default() })
        .unwrap_or_else(|e| fail("the engine with the download profile", &e.to_string()));
    let options =
        EvalOptions { timeout: Duration::from_secs(300), disk: Some(room), file_size: Some(room), ..eval_opts() };
    let hosts = cran.dir.join("hosts");
    let tmp = cran.dir.join("direct-tmp");
    let server = server_pid(&cran);
    let (mut busy_proxied, mut busy_direct) = (Vec::new(), Vec::new());
    let mut runners = vec![runner(PROXIED, true, || {
        sample(bytes, server, &mut busy_proxied, || proxied_once(&engine, &options, &code, &cran, bytes))
    })];

    let direct_ready = peers.rscript.clone().and_then(|()| {
        let machine = std::fs::read_to_string("/etc/hosts")
            .map_err(|e| format!("/etc/hosts: {e}: the direct download binds a copy over it"))?;
        std::fs::write(&hosts, format!("{machine}\n{} {CRAN_HOST}\n", cran.address))
            .and_then(|()| std::fs::create_dir_all(&tmp))
            .map_err(|e| format!("{}: {e}", cran.dir.display()))
    });
    match direct_ready {
        Ok(()) => runners.push(runner(DIRECT, false, || {
            sample(bytes, server, &mut busy_direct, || direct_once(cfg, &code, &hosts, &tmp, room))
        })),
        Err(e) => report.skip(SCENARIO, DIRECT, &e),
    }
    interleave(report, SCENARIO, "MB/s", cfg.downloads, runners);
    // Whether the python server limited a download: near 100% it did.
    let busy = |fractions: &[f64]| match stats(fractions) {
        Some(s) => format!("test server on a CPU {:.0}% of the download (median)", 100.0 * s.median),
        None => "test server's CPU time not read".to_string(),
    };
    let ratio = match (report.median_of(SCENARIO, PROXIED), report.median_of(SCENARIO, DIRECT)) {
        (Some(proxied), Some(direct)) => {
            let ratio = proxied / direct;
            println!("  {SCENARIO}: proxied {proxied:.0} MB/s, direct {direct:.0} MB/s, proxied/direct {ratio:.2}");
            format!("proxied/direct = {ratio:.2}; ")
        }
        _ => String::new(),
    };
    for row in report.rows.iter_mut().filter(|r| r.scenario == SCENARIO && r.skipped.is_none()) {
        row.note = match row.system.as_str() {
            PROXIED => format!("{mib} MiB per download; {ratio}{}", busy(&busy_proxied)),
            _ => busy(&busy_direct),
        };
    }
}
