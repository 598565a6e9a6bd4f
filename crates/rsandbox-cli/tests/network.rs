//! The network allowlist end to end (issue #27), through the real CLI as root: a
//! CRAN-like repository over HTTPS on a test host of this machine
//! ([`common::cran::CranServer`]), reached through the supervisor's proxy from a
//! sandbox whose profile allows `cran.test`: `install.packages()` then `library()`,
//! `readLines(url())`, `download.file()`; a host outside the allowlist is an R error
//! naming the host and the rule; the result's `network` records each connection.
//! Needs `cargo build --workspace` first, root (skipped with the reason otherwise),
//! `openssl`, `ip`, `nsenter` and `python3` (scripts/install-deps.sh).
#![allow(clippy::undocumented_unsafe_blocks)]

mod common;

use common::cran::{CranServer, CRAN_HOST};
use common::*;
use serde_json::Value;
use std::sync::OnceLock;

fn server() -> Option<&'static CranServer> {
    static SERVER: OnceLock<Option<CranServer>> = OnceLock::new();
    SERVER.get_or_init(CranServer::start).as_ref()
}

fn run_r(profile: &std::path::Path, code: &str, extra: &[&str]) -> (Output, Value) {
    let file = fixture("network.R", code.as_bytes());
    let mut args = vec!["run", "--json", "--profile"];
    let profile = profile.to_string_lossy().to_string();
    args.push(&profile);
    args.extend_from_slice(extra);
    let file = file.to_string_lossy().to_string();
    args.push(&file);
    let out = rsandbox(Who::Root, &args);
    let json = out.json();
    (out, json)
}

fn records(json: &Value) -> Vec<Value> {
    json["network"].as_array().cloned().unwrap_or_default()
}

#[test]
fn install_packages_from_an_allowed_repository_then_library() {
    let _lock = shared();
    let Some(cran) = server() else { return };
    let profile = cran.profile("compile-cran", "compile", &[CRAN_HOST], &[], "");
    let code = format!(
        "{}lib <- file.path(getwd(), 'lib'); dir.create(lib)
install.packages('tinypkg', repos = 'https://{CRAN_HOST}', lib = lib, quiet = TRUE)
library(tinypkg, lib.loc = lib)
cat(hello(), '\\n')
cat('PACKAGES:', readLines(url('https://{CRAN_HOST}/src/contrib/PACKAGES'))[1], '\\n')
download.file('https://{CRAN_HOST}/src/contrib/PACKAGES', 'P', quiet = TRUE)
cat('downloaded:', readLines('P')[1], '\\n')
",
        cran.trust_ca()
    );
    let (out, json) = run_r(&profile, &code, &["--timeout", "120"]);
    assert_outcome(&out, &json, "ok", 0);
    let stdout = str_at(&json, "/stdout", &out);
    assert!(stdout.contains("hello from tinypkg"), "{out}");
    assert!(stdout.contains("PACKAGES: Package: tinypkg"), "{out}");
    assert!(stdout.contains("downloaded: Package: tinypkg"), "{out}");
    let records = records(&json);
    assert!(!records.is_empty(), "no network records:{out}");
    for record in &records {
        assert_eq!(record["host"], CRAN_HOST, "{record}");
        assert_eq!(record["port"], 443, "{record}");
        assert_eq!(record["allowed"], true, "{record}");
        assert_eq!(record["address"], cran.address.as_str(), "{record}");
        assert!(record["bytes_in"].as_u64().unwrap() > 0 && record["bytes_out"].as_u64().unwrap() > 0, "{record}");
    }
    assert!(json["layers"]["proxy_port"].is_u64(), "{out}");
}

#[test]
fn a_host_outside_the_allowlist_is_an_r_error_naming_the_host_and_the_rule() {
    let _lock = shared();
    let Some(cran) = server() else { return };
    let profile = cran.profile("strict-cran", "strict", &[CRAN_HOST], &[], "");
    let code = format!("{}x <- readLines(url('https://api.other.test/data'))\n", cran.trust_ca());
    let audit = cran.dir.join("denied-audit.jsonl");
    let (out, json) = run_r(&profile, &code, &["--audit-log", &audit.to_string_lossy()]);
    assert_outcome(&out, &json, "error", 1);
    let message = str_at(&json, "/error/message", &out);
    assert!(message.contains("api.other.test:443 is not in this profile's network.allow"), "{out}");
    let records = records(&json);
    assert_eq!(records.len(), 1, "{out}");
    assert_eq!(records[0]["host"], "api.other.test");
    assert_eq!(records[0]["allowed"], false);
    assert_eq!(records[0]["bytes_in"], 0);
    // The audit log has the same record.
    let log = std::fs::read_to_string(&audit).unwrap();
    let logged: Vec<Value> =
        log.lines().map(|l| serde_json::from_str(l).unwrap()).filter(|l: &Value| l["event"] == "network").collect();
    assert_eq!(logged.len(), 1, "{log}");
    assert_eq!(
        (&logged[0]["host"], &logged[0]["allowed"]),
        (&Value::from("api.other.test"), &Value::from(false)),
        "{log}"
    );
    assert!(logged[0]["reason"].as_str().unwrap().contains("not in this profile's network.allow"), "{log}");
}

#[test]
fn the_proxy_is_in_the_environment_and_no_other_port_or_server_socket_is_reachable() {
    let _lock = shared();
    let Some(cran) = server() else { return };
    let profile = cran.profile("env-cran", "strict", &[CRAN_HOST], &[], "");
    let code = "p <- Sys.getenv(c('http_proxy', 'https_proxy', 'HTTP_PROXY', 'HTTPS_PROXY'))
stopifnot(length(unique(p)) == 1L)
cat(p[[1]], '\\n')
port <- as.integer(sub('.*:', '', p[[1]]))
other <- tryCatch({ socketConnection('127.0.0.1', port + 1L, timeout = 2); 'OPENED' }, error = function(e) 'refused', warning = function(w) 'refused')
server <- tryCatch({ serverSocket(0L); 'LISTENING' }, error = function(e) 'refused', warning = function(w) 'refused')
cat(other, server, '\\n')
";
    let (out, json) = run_r(&profile, code, &[]);
    assert_outcome(&out, &json, "ok", 0);
    let port = json["layers"]["proxy_port"].as_u64().expect("layers.proxy_port");
    let stdout = str_at(&json, "/stdout", &out);
    assert!(stdout.starts_with(&format!("http://127.0.0.1:{port} \n")), "{out}");
    assert!(stdout.contains("refused refused"), "{out}");
    // Without [network] there is no proxy at all.
    let (out, json) = eval_json(Who::Root, &[], "cat(Sys.getenv('https_proxy'), '|')");
    assert_outcome(&out, &json, "ok", 0);
    assert_eq!(json["stdout"], " |", "{out}");
    assert!(json["layers"].get("proxy_port").is_none(), "{out}");
}

#[test]
fn a_network_profile_is_refused_without_namespaces() {
    let _lock = shared();
    let Some(cran) = server() else { return };
    let profile = cran.profile("nons-cran", "strict", &[CRAN_HOST], &[], "");
    let out = rsandbox(Who::Root, &["eval", "--json", "--no-namespaces", "--profile", &profile.to_string_lossy(), "1"]);
    assert_eq!(out.code, Some(2), "bad input:{out}");
    assert!(out.stderr.contains("the network allowlist needs a network namespace"), "{out}");
}

/// On a server the request's `limits.network` narrows the profile's allowlist and never
/// widens it (stdio here; HTTP and MCP take the same `limits` type): a narrowed request
/// is served, with its denials named; a host outside the ceiling is bad input; where the
/// server has no allowlist, asking for one is bad input too.
#[test]
fn a_request_narrows_the_servers_allowlist_and_never_widens_it() {
    let _lock = shared();
    let Some(cran) = server() else { return };
    let profile = cran.profile("serve-cran", "strict", &[CRAN_HOST, "mirror.test"], &[], "");
    let denied = format!("{}x <- readLines(url('https://mirror.test/'))", cran.trust_ca());
    let requests = [
        serde_json::json!({"op": "eval", "id": 1, "code": denied, "limits": {"network": {"allow": [CRAN_HOST]}}}),
        serde_json::json!({"op": "eval", "id": 2, "code": "1", "limits": {"network": {"allow": ["other.test"]}}}),
        serde_json::json!({"op": "eval", "id": 3, "code": "cat(Sys.getenv('https_proxy'), '|')", "limits": {"network": {"allow": []}}}),
    ];
    let stdin: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let out = rsandbox_with(
        Who::Root,
        &["serve", "--stdio", "--profile", &profile.to_string_lossy()],
        &[],
        Some(stdin.as_bytes()),
    );
    let answers: Vec<Value> = out.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let answer = |id: u64| answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("no answer {id}:{out}"));
    let narrowed = &answer(1)["result"];
    assert_eq!(narrowed["outcome"], "error", "{out}");
    assert!(
        narrowed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mirror.test:443 is not in this request's network.allow"),
        "{out}"
    );
    assert_eq!(narrowed["network"][0]["host"], "mirror.test", "{out}");
    let widened = answer(2);
    assert_eq!(widened["error"]["code"], "bad_input", "{out}");
    assert!(widened["error"]["message"].as_str().unwrap().contains("outside this server's network allowlist"), "{out}");
    assert_eq!(answer(3)["result"]["stdout"], " |", "an empty allow turns the network off:{out}");
    // A server without an allowlist: a request cannot bring one.
    let stdin = format!("{}\n", requests[1]);
    let out = rsandbox_with(Who::Root, &["serve", "--stdio"], &[], Some(stdin.as_bytes()));
    let answer: Value = serde_json::from_str(out.stdout.lines().next().unwrap_or_default()).unwrap_or_default();
    assert_eq!(answer["error"]["code"], "bad_input", "{out}");
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("has no network allowlist"), "{out}");
}

/// `rsandbox learn` records the hosts code tried to reach (the learning sandbox always has
/// the proxy, refusing and recording everything at first) and proposes `[network]
/// allow`; the learned profile then runs the code.
#[test]
fn learn_proposes_the_hosts_the_code_tried_to_reach() {
    let _lock = shared();
    let Some(cran) = server() else { return };
    // The operator's address for cran.test, nothing allowed yet.
    let start = cran.profile("learn-cran", "strict", &[], &[], "");
    let code =
        format!("{}cat(readLines(url('https://{CRAN_HOST}/src/contrib/PACKAGES'))[1], '\\n')\n", cran.trust_ca());
    let job = fixture("learn-network.R", code.as_bytes());
    let out = rsandbox(Who::Root, &["learn", "--profile", &start.to_string_lossy(), &job.to_string_lossy()]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("[network]\nallow = [\"cran.test\"]"), "{out}");
    assert!(out.stdout.contains(&format!("\"cran.test\" = \"{}\"", cran.address)), "{out}");
    let learned = cran.dir.join("learned.toml");
    std::fs::write(&learned, &out.stdout).unwrap();
    let (out, json) = run_r(&learned, &code, &[]);
    assert_outcome(&out, &json, "ok", 0);
    assert!(str_at(&json, "/stdout", &out).contains("Package: tinypkg"), "{out}");
}

const NARROW_TOKEN: &str = "narrow-token-0123456789abcdef";
const WIDE_TOKEN: &str = "wide-token-fedcba9876543210fedc";

/// A server profile allowing `a.test` and `b.test`, with addresses for them the proxy
/// refuses after the allowlist (documentation addresses): no test host is needed, and a
/// host that passes the allowlist is told apart from one that does not by the reason.
/// Returns the directory (profile.toml, tokens).
fn two_host_server_files(tag: &str, tokens: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rsandbox-token-network-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = "extends = \"strict\"\n[network]\nallow = [\"a.test\", \"b.test\"]\n\
                   hosts = { \"a.test\" = \"192.0.2.1\", \"b.test\" = \"192.0.2.2\" }\nconnect_timeout = 2\n";
    std::fs::write(dir.join("profile.toml"), profile).unwrap();
    let token_file = dir.join("tokens");
    std::fs::write(&token_file, tokens).unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    dir
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: a network sandbox needs root here (a network namespace of its own)");
    }
    root
}

/// Per-token network ceilings on `serve --http` (issue #27): two tokens on one server
/// whose profile allows `a.test` and `b.test`. `narrow` (`network=a.test`) asking for
/// `b.test` is 400 bad_input on eval, jobs and sessions; its default eval trying `b.test`
/// is refused by the allowlist, named in the record. `wide` (no `network=`) gets the
/// server's allowlist: its `b.test` passes the allowlist (refused later, for its address).
#[test]
fn a_tokens_network_narrows_the_servers_and_its_requests_may_only_narrow_it() {
    let _lock = shared();
    if !is_root() {
        return;
    }
    let dir = two_host_server_files("http", &format!("narrow:{NARROW_TOKEN} network=a.test\nwide:{WIDE_TOKEN}\n"));
    let server = common::http_server::HttpServer::start(
        &[
            "--profile",
            dir.join("profile.toml").to_str().unwrap(),
            "--token-file",
            dir.join("tokens").to_str().unwrap(),
            "--prefork",
            "1",
        ],
        &[],
    );
    let widen = serde_json::json!({"code": "1", "limits": {"network": {"allow": ["b.test"]}}});
    for route in ["/v1/eval", "/v1/jobs"] {
        let (status, answer) = server.request("POST", route, Some(NARROW_TOKEN), Some(&widen));
        assert_eq!(status, 400, "{route}: {answer}");
        assert_eq!(answer["error"]["code"], "bad_input", "{route}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("\"b.test\" is outside this token's network allowlist (a.test)"),
            "{route}: {message}"
        );
    }
    let session = serde_json::json!({"limits": {"network": {"allow": ["b.test"]}}});
    let (status, answer) = server.request("POST", "/v1/sessions", Some(NARROW_TOKEN), Some(&session));
    assert_eq!((status, &answer["error"]["code"]), (400, &Value::from("bad_input")), "{answer}");
    // Narrowing to what the token has is served.
    let same = serde_json::json!({"code": "1", "limits": {"network": {"allow": ["a.test"]}}});
    let (status, answer) = server.request("POST", "/v1/eval", Some(NARROW_TOKEN), Some(&same));
    assert_eq!((status, &answer["outcome"]), (200, &Value::from("ok")), "{answer}");

    let reach_b = serde_json::json!({"code": "x <- readLines(url('https://b.test/'))"});
    let (status, narrow) = server.request("POST", "/v1/eval", Some(NARROW_TOKEN), Some(&reach_b));
    assert_eq!((status, &narrow["outcome"]), (200, &Value::from("error")), "{narrow}");
    let record = &records(&narrow)[0];
    assert_eq!((&record["host"], &record["allowed"]), (&Value::from("b.test"), &Value::from(false)), "{narrow}");
    assert!(record["reason"].as_str().unwrap().contains("b.test:443 is not in this token's network.allow"), "{narrow}");

    let (status, wide) = server.request("POST", "/v1/eval", Some(WIDE_TOKEN), Some(&reach_b));
    assert_eq!(status, 200, "{wide}");
    let record = &records(&wide)[0];
    assert_eq!(record["host"], "b.test", "{wide}");
    let reason = record["reason"].as_str().unwrap_or_default();
    assert!(!reason.contains("network.allow"), "the allowlist let b.test through for wide: {wide}");
    assert!(reason.contains("resolves to 192.0.2.2"), "refused for its address instead: {wide}");
    drop(server);
    std::fs::remove_dir_all(&dir).ok();
}

/// A token whose `network=` reaches past the profile's allowlist stops the server at
/// start (before R), naming the token's name and the entry, never the token.
#[test]
fn a_token_network_outside_the_profile_stops_the_server_naming_the_token() {
    let _lock = shared();
    let dir = two_host_server_files("start", &format!("narrow:{NARROW_TOKEN} network=a.test,c.test\n"));
    let (profile, tokens) = (dir.join("profile.toml"), dir.join("tokens"));
    for front in ["serve", "mcp"] {
        let out = rsandbox(
            Who::Root,
            &[
                front,
                "--http",
                "127.0.0.1:0",
                "--profile",
                profile.to_str().unwrap(),
                "--token-file",
                tokens.to_str().unwrap(),
            ],
        );
        assert_eq!(out.code, Some(2), "{front}: bad input:{out}");
        assert!(out.stderr.contains("token narrow: network entry \"c.test\" is outside"), "{front}:{out}");
        assert!(!out.stderr.contains(NARROW_TOKEN), "{front}: never the token:{out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A session carried to another replica (`--snapshot-dir`) keeps the options it was made
/// with, its network included: made by `narrow` (network=a.test) on a replica, restored
/// on one whose token file gives the same token the server's whole allowlist, it still
/// has only a.test.
#[test]
fn a_carried_session_keeps_the_network_it_was_made_with() {
    let _lock = shared();
    if !is_root() {
        return;
    }
    let dir = two_host_server_files("carry", &format!("narrow:{NARROW_TOKEN} network=a.test\n"));
    let snapshots = dir.join("snapshots");
    std::fs::create_dir_all(&snapshots).unwrap();
    let wider_tokens = dir.join("tokens-b");
    std::fs::write(&wider_tokens, format!("narrow:{NARROW_TOKEN}\n")).unwrap();
    std::fs::set_permissions(&wider_tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let replica = |node: &str, tokens: &std::path::Path| {
        common::http_server::HttpServer::start(
            &[
                "--profile",
                dir.join("profile.toml").to_str().unwrap(),
                "--token-file",
                tokens.to_str().unwrap(),
                "--snapshot-dir",
                snapshots.to_str().unwrap(),
                "--prefork",
                "1",
            ],
            &[("RSANDBOX_NODE_ID", node)],
        )
    };
    let mut a = replica("net-a", &dir.join("tokens"));
    let (status, created) = a.request("POST", "/v1/sessions", Some(NARROW_TOKEN), Some(&serde_json::json!({})));
    assert_eq!(status, 201, "{created}");
    let id = created["session"].as_str().unwrap().to_string();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGTERM) };
    a.child.wait().unwrap();
    assert!(snapshots.join(format!("{id}.json")).is_file(), "the stopped replica saved the session");

    let b = replica("net-b", &wider_tokens);
    let reach_b = serde_json::json!({"code": "x <- readLines(url('https://b.test/'))"});
    let (status, answer) = b.request("POST", &format!("/v1/sessions/{id}/execute"), Some(NARROW_TOKEN), Some(&reach_b));
    assert_eq!((status, &answer["outcome"]), (200, &Value::from("error")), "{answer}");
    let record = &records(&answer)[0];
    assert_eq!(record["host"], "b.test", "{answer}");
    // What the session was made with travels as its request's list.
    assert!(record["reason"].as_str().unwrap().contains("is not in this request's network.allow"), "{answer}");
    // A session the same token makes on b now gets the server's allowlist.
    let (status, created) = b.request("POST", "/v1/sessions", Some(NARROW_TOKEN), Some(&serde_json::json!({})));
    assert_eq!(status, 201, "{created}");
    let fresh = created["session"].as_str().unwrap();
    let (_, answer) = b.request("POST", &format!("/v1/sessions/{fresh}/execute"), Some(NARROW_TOKEN), Some(&reach_b));
    assert!(records(&answer)[0]["reason"].as_str().unwrap().contains("resolves to 192.0.2.2"), "{answer}");
    drop(b);
    std::fs::remove_dir_all(&dir).ok();
}

/// A name without a `hosts` override is resolved by the supervisor's own resolver, the
/// C library linked into the `rsandbox` binary (a static PIE, `build.rs`), as this test's
/// own (dynamically linked) process resolves it: `localhost`, allowed by name, resolves
/// through `/etc/hosts` to the loopback address, which the proxy refuses after the
/// allowlist, naming the address it found; on a machine whose resolver does not know the
/// name (a bare debootstrap root has no `/etc/hosts`), it says the name could not be
/// resolved.
#[test]
fn a_name_without_an_override_is_resolved_by_the_system_resolver() {
    let _lock = shared();
    if !is_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rsandbox-resolver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("profile.toml");
    std::fs::write(&profile, "extends = \"strict\"\n[network]\nallow = [\"localhost\"]\nconnect_timeout = 2\n")
        .unwrap();
    let (out, json) = run_r(&profile, "x <- readLines(url('https://localhost/'))", &[]);
    assert_outcome(&out, &json, "error", 1);
    let record = &records(&json)[0];
    assert_eq!((&record["host"], &record["allowed"]), (&Value::from("localhost"), &Value::from(false)), "{out}");
    let reason = record["reason"].as_str().unwrap_or_default();
    match std::net::ToSocketAddrs::to_socket_addrs(&("localhost", 443)) {
        Ok(addresses) => {
            let expected: Vec<String> = addresses.map(|a| format!("localhost resolves to {}", a.ip())).collect();
            assert!(
                expected.iter().any(|e| reason.contains(e.as_str())),
                "not refused for an address the system's resolver gives ({expected:?}): {out}"
            );
        }
        Err(_) => assert!(
            reason.starts_with("localhost could not be resolved"),
            "the system's resolver does not know localhost, nor may the supervisor's: {out}"
        ),
    }
    std::fs::remove_dir_all(&dir).ok();
}
