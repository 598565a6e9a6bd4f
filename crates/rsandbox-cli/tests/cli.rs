//! End-to-end tests of the `rsandbox` command line. Every scenario runs twice, as root
//! (`<scenario>::as_root`: each sandbox drops to its own uid >= 2000000000) and as the
//! unprivileged user `rsandbox-test` (`<scenario>::as_user`: a user namespace instead).
//!
//! Needs root and the zygote: run `cargo build` first, then `cargo test -p rsandbox-cli`.
//! Exit statuses (see src/main.rs): 0 ok, 1 R error, 2 bad input, 3 timeout, 4 cpu,
//! 5 memory, 6 output, 7 file size, 8 processes, 9 violation, 10 crashed, 11 setup failed.

#[macro_use]
mod common;

use common::*;
use serde_json::{json, Value};
use std::io::ErrorKind;
use std::net::TcpListener;
use std::time::Duration;

// =======================================================================================
// The basics: a value comes back, and the layers were applied.
// =======================================================================================

both!(
    fn value_and_layers(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], "x <- 1; x");
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!(1), "{out}");
        assert_eq!(j["visible"], json!(true), "{out}");
        assert_eq!(j["stdout"], "[1] 1\n", "{out}");
        assert_eq!(j["stderr"], "", "{out}");
        let layers = &j["layers"];
        assert_eq!(layers["landlock"], "full", "{out}");
        assert_eq!(layers["seccomp"], json!(true), "{out}");
        let namespaces: Vec<&str> =
            layers["namespaces"].as_array().expect("namespaces").iter().filter_map(Value::as_str).collect();
        for ns in ["net", "ipc", "uts"] {
            assert!(namespaces.contains(&ns), "namespace {ns} missing:{out}");
        }
        match who {
            Who::Root => {
                let uid = layers["identity"]["uid"].as_u64().expect("identity when root");
                assert!(uid >= u64::from(SANDBOX_UID_BASE), "sandbox uid {uid}:{out}");
                assert!(!namespaces.contains(&"user"), "{out}");
            }
            Who::User => {
                assert_eq!(layers["identity"], Value::Null, "{out}");
                assert!(namespaces.contains(&"user"), "user namespace missing:{out}");
            }
        }
    }
);

both!(
    fn run_reads_a_file_and_standard_input(who) {
        let _g = shared();
        let file = fixture("script.R", b"a <- 20\nb <- 22\ncat(a + b, \"\\n\")\n");
        let out = rsandbox(who, &["run", file.to_str().unwrap()]);
        out.assert_code(0);
        assert_eq!(out.stdout, "42 \n", "{out}");
        let out = rsandbox_with(who, &["run", "--json", "-"], &[], Some(b"sum(1:10)\n"));
        out.assert_code(0);
        assert_eq!(out.json()["value"], json!(55), "{out}");
    }
);

// =======================================================================================
// The paper's security unit tests (RAppArmor).
// =======================================================================================

both!(
    /// Reading a system log that every local user may read.
    fn reading_a_system_log_fails(who) {
        let _g = shared();
        let token = planted_secret();
        // Control: outside the sandbox this identity can read the log.
        let direct = run_directly(who, "/bin/cat", &[SECRET_LOG]);
        assert!(String::from_utf8_lossy(&direct.stdout).contains(token), "control: cat {SECRET_LOG} as {who:?} failed");

        let code = format!("readLines({SECRET_LOG:?})");
        let (out, j) = eval_json(who, &[], &code);
        assert_outcome(&out, &j, "error", 1);
        let message = str_at(&j, "/error/message", &out);
        assert!(message.contains("cannot open"), "error message {message:?}:{out}");
        assert!(!out.stdout.contains(token) && !out.stderr.contains(token), "the secret leaked:{out}");
    }
);

/// R code that lists /root, /home and /tmp recursively and prints every file it finds.
const SCAN_HOMES: &str = r#"
for (d in c("/root", "/home", "/tmp")) {
  hits <- tryCatch(list.files(d, recursive = TRUE, full.names = TRUE, all.files = TRUE),
                   error = function(e) { cat("list error:", conditionMessage(e), "\n"); character() })
  cat(d, ":", length(hits), "files\n")
  for (f in hits) {
    cat("==", f, "\n")
    txt <- tryCatch(readLines(f, warn = FALSE),
                    error = function(e) paste("read error:", conditionMessage(e)),
                    warning = function(w) paste("read warning:", conditionMessage(w)))
    cat(txt, sep = "\n")
  }
}
for (f in c("/root/.ssh/rsandbox-test-secret", "/root/Documents/rsandbox-test-secret.txt",
            "/home/rsandbox-test/Documents/rsandbox-test-secret.txt", "/tmp/rsandbox-test-secret.txt")) {
  txt <- tryCatch(readLines(f, warn = FALSE), error = function(e) "direct read failed",
                  warning = function(w) "direct read failed")
  cat(f, ":", txt, "\n")
}
cat("scan complete\n")
"#;

both!(
    /// Scanning home directories (and /tmp) for secrets finds nothing.
    fn scanning_home_directories_finds_no_secrets(who) {
        let _g = shared();
        let token = planted_secret();
        // Control: outside the sandbox this identity can read the world-readable secrets.
        for path in ["/home/rsandbox-test/Documents/rsandbox-test-secret.txt", "/tmp/rsandbox-test-secret.txt"] {
            let direct = run_directly(who, "/bin/cat", &[path]);
            assert!(String::from_utf8_lossy(&direct.stdout).contains(token), "control: cat {path} as {who:?} failed");
        }
        let script = fixture("scan.R", SCAN_HOMES.as_bytes());
        let out = rsandbox(who, &["run", "--json", script.to_str().unwrap()]);
        let j = out.json();
        assert_outcome(&out, &j, "ok", 0);
        assert!(!out.stdout.contains(token) && !out.stderr.contains(token), "the secret leaked:{out}");
        let stdout = str_at(&j, "/stdout", &out);
        assert!(stdout.ends_with("scan complete\n"), "the scan did not finish:{out}");
        assert_eq!(stdout.matches("direct read failed").count(), 4, "{out}");
        // Not even the names are visible: the directories cannot be listed.
        assert!(!stdout.contains("== /root") && !stdout.contains("== /home"), "home directories listed:{out}");
        assert!(!stdout.contains("== /tmp/rsandbox-test-secret"), "/tmp listed:{out}");
    }
);

both!(
    /// A 76 MB allocation under a 10 MB limit; without the limit it succeeds.
    fn allocating_76_mb_hits_the_memory_limit(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &["--memory", "10M"], "x <- numeric(1e7)");
        assert_outcome(&out, &j, "memory_limit", 5);
        let message = str_at(&j, "/error/message", &out);
        assert!(message.contains("cannot allocate vector of size"), "error message {message:?}:{out}");

        let (out, j) = eval_json(who, &[], "x <- numeric(1e7); length(x)");
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!(10_000_000), "{out}");
    }
);

both!(
    /// `svd` of a 2000 x 2000 matrix is killed at the 2 s deadline, promptly.
    fn svd_of_a_large_matrix_times_out(who) {
        let _g = exclusive();
        let timeout = 2.0;
        let (out, j) = eval_json(who, &["--timeout", "2"], "m <- matrix(rnorm(4e6), 2000); s <- svd(m)");
        let wall = out.elapsed.as_secs_f64();
        println!("svd with --timeout {timeout} as {who:?}: CLI wall time {wall:.3} s, sandbox wall_ms {}", j["usage"]["wall_ms"]);
        assert_outcome(&out, &j, "timeout", 3);
        assert!(wall < timeout + 2.5, "took {wall:.3} s for a {timeout} s timeout:{out}");
        assert!(wall >= timeout, "ended after {wall:.3} s, before the {timeout} s timeout:{out}");
        assert_no_sandbox_processes(who, &out);
    }
);

both!(
    /// A fork bomb through `parallel::mcparallel` stops at the process limit and leaves
    /// nothing behind.
    fn fork_bomb_hits_the_process_limit(who) {
        let _g = exclusive();
        let (out, j) = eval_json(
            who,
            &["--nproc", "20", "--timeout", "10"],
            "library(parallel); repeat mcparallel(Sys.sleep(60))",
        );
        assert_outcome(&out, &j, "process_limit", 8);
        assert!(out.elapsed < Duration::from_secs(10), "the fork bomb ran into the timeout:{out}");
        assert_no_sandbox_processes(who, &out);
    }
);

// =======================================================================================
// The other outcomes.
// =======================================================================================

both!(
    fn busy_loop_hits_the_cpu_limit(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &["--cpu", "1"], "repeat {}");
        assert_outcome(&out, &j, "cpu_limit", 4);
        // The CPU reported comes out under the limit that ended the loop (884 and 987 ms
        // seen for 1 s); only check that the loop did burn CPU.
        assert!(j["usage"]["cpu_ms"].as_u64().unwrap() >= 500, "{out}");
    }
);

both!(
    fn big_file_hits_the_file_size_limit(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &["--fsize", "1M"], r#"writeBin(raw(2e6), "f")"#);
        assert_outcome(&out, &j, "file_size_limit", 7);
    }
);

both!(
    fn long_output_hits_the_output_limit(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &["--max-output", "1K"], r#"cat(strrep("x", 1e6))"#);
        assert_outcome(&out, &j, "output_limit", 6);
        let kept = str_at(&j, "/stdout", &out).len() + str_at(&j, "/stderr", &out).len();
        assert!(kept <= 1024, "{kept} bytes of output kept:{out}");
    }
);

both!(
    fn running_a_program_is_a_violation(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], r#"system("ls")"#);
        assert_outcome(&out, &j, "violation", 9);
        assert_eq!(j["violation"]["syscall"], "execve", "{out}");
    }
);

both!(
    fn network_connections_fail(who) {
        let _g = shared();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a listener");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let code = format!(r#"con <- socketConnection("127.0.0.1", {port}, timeout = 5); "connected""#);
        let (out, j) = eval_json(who, &[], &code);
        assert_outcome(&out, &j, "error", 1);
        let message = str_at(&j, "/error/message", &out);
        assert!(message.contains("cannot open the connection"), "error message {message:?}:{out}");
        match listener.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("the listener accepted a connection: {other:?}{out}"),
        }
    }
);

both!(
    fn deep_recursion_is_an_r_error(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], "f <- function(n) f(n + 1); f(1)");
        assert_outcome(&out, &j, "error", 1);
        // R's own message, as from Rscript: "C stack usage  7976660 is too close to the limit".
        let message = str_at(&j, "/error/message", &out);
        assert!(
            message.starts_with("C stack usage") && message.ends_with("is too close to the limit"),
            "error message {message:?}:{out}"
        );
    }
);

both!(
    fn r_error_reports_message_and_call(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], r#"f <- function() stop("boom"); f()"#);
        assert_outcome(&out, &j, "error", 1);
        assert_eq!(j["error"], json!({"message": "boom", "call": "f()", "trace": ["f()", "stop(\"boom\")"]}), "{out}");
        // Without --json, Rscript-like.
        let out = rsandbox(who, &["eval", r#"f <- function() stop("boom"); f()"#]);
        out.assert_code(1);
        assert!(out.stderr.contains("Error in f() : boom"), "{out}");
    }
);

both!(
    fn quit_with_a_status_is_an_error(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], "q(status = 3)");
        assert_outcome(&out, &j, "error", 1);
    }
);

both!(
    /// A forked child that would outlive the evaluation is killed with it.
    fn orphans_are_killed(who) {
        let _g = exclusive();
        let (out, j) = eval_json(who, &[], "library(parallel); p <- mcparallel(Sys.sleep(999)); 1");
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!(1), "{out}");
        assert!(out.elapsed < Duration::from_secs(10), "{out}");
        assert_no_sandbox_processes(who, &out);
    }
);

// =======================================================================================
// Legitimate R keeps working.
// =======================================================================================

both!(
    fn lm_coefficients(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], "coef(lm(mpg ~ wt, mtcars))");
        assert_outcome(&out, &j, "ok", 0);
        let intercept = j["value"]["(Intercept)"].as_f64().unwrap_or_else(|| panic!("no intercept:{out}"));
        let slope = j["value"]["wt"].as_f64().unwrap_or_else(|| panic!("no slope:{out}"));
        assert!((intercept - 37.285).abs() < 1e-3, "intercept {intercept}:{out}");
        assert!((slope + 5.344).abs() < 1e-3, "slope {slope}:{out}");
    }
);

both!(
    fn plot_gives_one_png(who) {
        use base64::Engine as _;
        let _g = shared();
        let (out, j) = eval_json(who, &[], "plot(1:10)");
        assert_outcome(&out, &j, "ok", 0);
        let plots = j["plots"].as_array().expect("plots");
        assert_eq!(plots.len(), 1, "{out}");
        assert_eq!(plots[0]["format"], "png", "{out}");
        let data = base64::engine::general_purpose::STANDARD
            .decode(plots[0]["data_base64"].as_str().expect("data_base64"))
            .unwrap_or_else(|e| panic!("bad base64 ({e}):{out}"));
        assert!(data.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG: {:?}{out}", &data[..data.len().min(8)]);
    }
);

both!(
    fn mclapply_works(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], "unlist(parallel::mclapply(1:4, function(i) i^2, mc.cores = 2))");
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!([1, 4, 9, 16]), "{out}");
    }
);

both!(
    fn files_in_the_workspace_and_tempdir(who) {
        let _g = shared();
        let code = r#"
            writeLines("in the workspace", "a.txt")
            f <- file.path(tempdir(), "b.txt")
            writeLines("in tempdir", f)
            c(readLines("a.txt"), readLines(f))
        "#;
        let (out, j) = eval_json(who, &[], code);
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!(["in the workspace", "in tempdir"]), "{out}");
        // Every evaluation starts from a fresh workspace.
        let (out, j) = eval_json(who, &[], r#"file.exists("a.txt")"#);
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!(false), "{out}");
    }
);

both!(
    fn seeded_random_numbers_repeat(who) {
        let _g = shared();
        let code = "set.seed(42); runif(2)";
        let (out1, j1) = eval_json(who, &[], code);
        assert_outcome(&out1, &j1, "ok", 0);
        let (out2, j2) = eval_json(who, &[], code);
        assert_outcome(&out2, &j2, "ok", 0);
        assert_eq!(j1["value"], j2["value"], "{out1}{out2}");
        let v: Vec<f64> = j1["value"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert!((v[0] - 0.914806043496355).abs() < 1e-12 && (v[1] - 0.937075413297862).abs() < 1e-12, "{out1}");
    }
);

both!(
    fn warnings_and_messages_are_captured(who) {
        let _g = shared();
        let code = r#"warning("w1"); message("m1"); f <- function() warning("w2"); f(); 2"#;
        let (out, j) = eval_json(who, &[], code);
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!(2), "{out}");
        assert_eq!(j["messages"], json!(["m1\n"]), "{out}");
        assert_eq!(
            j["warnings"],
            json!([{"message": "w1", "call": null}, {"message": "w2", "call": "f()"}]),
            "{out}"
        );
        assert_eq!(j["stderr"], "", "{out}");
        assert_eq!(out.stderr, "", "{out}");
    }
);

both!(
    fn invisible_values_are_not_visible(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], "invisible(5)");
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["visible"], json!(false), "{out}");
        assert_eq!(j["stdout"], "", "{out}");
    }
);

// =======================================================================================
// Bad input: exit 2, nothing started. RSANDBOX_ZYGOTE points nowhere, so an attempt to
// start R would end in exit 11 ("failed to start the zygote") instead.
// =======================================================================================

const NO_ZYGOTE: [(&str, &str); 1] = [("RSANDBOX_ZYGOTE", "/nonexistent/rsandbox-zygote")];

#[track_caller]
fn assert_rejected(who: Who, args: &[&str], problem: &str) {
    let out = rsandbox_with(who, args, &NO_ZYGOTE, None);
    out.assert_code(2);
    assert!(out.stderr.contains(problem), "stderr does not name the problem ({problem:?}):{out}");
    assert!(!out.stderr.contains("zygote"), "something was started:{out}");
    assert_eq!(out.stdout, "", "{out}");
}

both!(
    /// The control for the tests below: valid input with no zygote is a setup failure
    /// (exit 11) that names the zygote, so exit 2 there means nothing was started.
    fn missing_zygote_is_a_setup_failure(who) {
        let _g = shared();
        let out = rsandbox_with(who, &["eval", "1"], &NO_ZYGOTE, None);
        out.assert_code(11);
        assert!(out.stderr.contains("failed to start the zygote"), "{out}");
        assert_eq!(out.stdout, "", "{out}");
    }
);

both!(
    fn empty_code_is_rejected(who) {
        let _g = shared();
        assert_rejected(who, &["eval", ""], "no code to evaluate");
        assert_rejected(who, &["eval", "--json", " \n\t"], "no code to evaluate");
    }
);

both!(
    /// A submission's link to a grader's file must not bring that file into the sandbox.
    fn a_symlink_inside_an_input_directory_is_refused(who) {
        let _g = shared();
        let dir = fixture("marker", b"").with_file_name(format!("linked-{who:?}"));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir(&dir).unwrap();
        set_modes(&[(&dir, 0o755)]);
        std::fs::write(dir.join("a.txt"), "mine").unwrap();
        set_modes(&[(&dir.join("a.txt"), 0o644)]);
        let link = dir.join("secret");
        std::os::unix::fs::symlink(planted_secret(), &link).unwrap();
        let dir = dir.to_str().unwrap();
        assert_rejected(who, &["eval", "--input", dir, "1"], "a symbolic link inside --input");
        std::fs::remove_file(&link).unwrap();
        // Without the link the directory is copied.
        let code = format!("readLines('linked-{who:?}/a.txt', warn = FALSE)");
        let out = rsandbox(who, &["eval", "--no-daemon", "--input", dir, &code]);
        out.assert_code(0);
        assert!(out.stdout.contains("mine"), "{out}");
    }
);

both!(
    fn a_missing_program_and_an_impossible_disk_quota_are_bad_input(who) {
        let _g = shared();
        assert_rejected(who, &["exec", "--", "nosuchprog"], "program \"nosuchprog\" not found");
        let out = rsandbox(who, &["eval", "--no-daemon", "--disk", "1T", "1"]);
        out.assert_code(2);
        assert!(out.stderr.contains("invalid disk: 1048576 MiB is more than this server's"), "{out}");
    }
);

/// `rsandbox eval … | head`: the reader went away; no panic, no message, and the status a
/// process killed by SIGPIPE gives.
#[test]
fn a_closed_stdout_ends_quietly() {
    let _g = shared();
    for json in ["", "--json"] {
        let script = format!(
            "set -o pipefail; \"$0\" eval --no-daemon {json} \"cat(strrep('x\\n', 1e5)); strrep('y', 1e6)\" | head -c 4 >/dev/null"
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script, binaries().cli.to_str().unwrap()])
            .env("RSANDBOX_NO_DAEMON", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{json}: {stderr}");
        assert_eq!(stderr, "", "{json}");
    }
}

both!(
    fn code_over_1_mib_is_rejected(who) {
        let _g = shared();
        let mut code = b"x <- 1\n".to_vec();
        code.resize((1 << 20) + 1, b'#');
        let file = fixture("big.R", &code);
        assert_rejected(who, &["run", file.to_str().unwrap()], "code is 1048577 bytes; the limit is 1048576");
        // Exactly 1 MiB is accepted.
        code.truncate(1 << 20);
        let file = fixture("limit.R", &code);
        let out = rsandbox(who, &["run", "--json", file.to_str().unwrap()]);
        out.assert_code(0);
    }
);

both!(
    fn invalid_utf8_is_rejected(who) {
        let _g = shared();
        let file = fixture("latin1.R", b"x <- \"caf\xe9\"\n");
        assert_rejected(who, &["run", file.to_str().unwrap()], "not valid UTF-8");
        let file = fixture("nul.R", b"x <- 1\0\n");
        assert_rejected(who, &["run", file.to_str().unwrap()], "NUL byte");
    }
);

both!(
    fn missing_file_is_rejected(who) {
        let _g = shared();
        assert_rejected(who, &["run", "/nonexistent.R"], "/nonexistent.R: No such file or directory");
    }
);

both!(
    fn nonsense_limits_are_rejected(who) {
        let _g = shared();
        assert_rejected(who, &["eval", "--memory", "12Q", "1"], "invalid --memory (a size such as \"512M\"): 12Q");
        assert_rejected(who, &["eval", "--timeout", "-1", "1"], "invalid --timeout (seconds, above 0, at most 86400): -1");
        assert_rejected(who, &["eval", "--timeout=-1", "1"], "invalid --timeout (seconds, above 0, at most 86400): -1");
        assert_rejected(who, &["eval", "--timeout", "abc", "1"], "invalid --timeout (seconds): abc");
        assert_rejected(who, &["eval", "--timeout", "0", "1"], "invalid --timeout (seconds, above 0, at most 86400): 0");
        assert_rejected(who, &["eval", "--nofile", "8", "1"], "nofile");
        // The engine's limits name the knob; the CLI names its flag.
        assert_rejected(who, &["eval", "--max-output", "1Q", "1"], "invalid --max-output (a size such as \"512M\"): 1Q");
        assert_rejected(who, &["exec", "--memory", "12Q", "--", "/bin/true"], "12Q");
    }
);

both!(
    /// Syntax errors are found by R's parser before anything runs; exit 2.
    fn syntax_error_is_bad_input(who) {
        let _g = shared();
        let (out, j) = eval_json(who, &[], "x <- 1 +");
        out.assert_code(2);
        assert_eq!(j["outcome"], "error", "{out}");
        // R reports an unexpected end of input at the start of the (empty) next line: 2:0.
        assert_eq!(j["syntax_error"]["line"], json!(2), "{out}");
        assert!(str_at(&j, "/syntax_error/message", &out).contains("unexpected end of input"), "{out}");

        // Nothing before the error ran.
        let (out, j) = eval_json(who, &[], "cat(\"ran\\n\")\ny <- )");
        out.assert_code(2);
        assert_eq!(j["syntax_error"]["line"], json!(2), "{out}");
        assert!(str_at(&j, "/syntax_error/message", &out).contains("unexpected ')'"), "{out}");
        assert_eq!(j["stdout"], "", "{out}");

        let out = rsandbox(who, &["eval", "x <- 1 +"]);
        out.assert_code(2);
        assert!(out.stderr.contains("unexpected end of input"), "{out}");
    }
);

both!(
    /// Without the network a connection fails as offline, and the CLI says why: after
    /// R's error, in its message; where the code went on, in a last line of its own.
    fn eval_says_why_the_network_failed(who) {
        let _g = shared();
        let out = rsandbox(who, &["eval", "url('http://example.com', open = 'r')"]);
        out.assert_code(1);
        assert!(out.stderr.contains("\nnetwork: this sandbox has no network: its profile gives it none"), "{out}");
        assert_eq!(out.stderr.matches("this sandbox has no network").count(), 1, "{out}");
        let out = rsandbox(who, &["eval", "x <- try(url('http://example.com', open = 'r'), silent = TRUE); 1"]);
        out.assert_code(0);
        assert!(out.stderr.ends_with("rsandbox: network: this sandbox has no network: its profile gives it none, so every connection is refused (a server's operator can allow hosts: the profile's [network] table)\n"), "{out}");
        let out = rsandbox(who, &["eval", "1"]);
        assert!(!out.stderr.contains("network"), "{out}");
    }
);

// =======================================================================================
// exec and check.
// =======================================================================================

both!(
    fn exec_runs_a_program(who) {
        let _g = shared();
        rsandbox(who, &["exec", "--", "/bin/true"]).assert_code(0);
        let out = rsandbox(who, &["exec", "--", "/bin/sh", "-c", "echo hello"]);
        out.assert_code(0);
        assert_eq!(out.stdout, "hello\n", "{out}");
        let out = rsandbox(who, &["exec", "--json", "--", "/bin/sh", "-c", "exit 3"]);
        out.assert_code(3);
        let report = out.stderr_json();
        assert_eq!(report["outcome"], "error", "{out}");
        assert_eq!(report["exit"]["code"], json!(3), "{out}");
    }
);

/// The pid of the program a running `rsandbox exec` started, once it runs (the child
/// is `rsandbox` until the launcher's exec, then the program).
fn running_program_of(cli: &std::process::Child) -> String {
    let children = format!("/proc/{0}/task/{0}/children", cli.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let pid = std::fs::read_to_string(&children).unwrap_or_default().split_whitespace().next().map(String::from);
        let comm = pid.as_ref().and_then(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok());
        if let (Some(pid), Some(comm)) = (pid, comm) {
            if comm != "rsandbox\n" {
                return pid;
            }
        }
        assert!(std::time::Instant::now() < deadline, "the program never started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

both!(
    /// A launch that fails says why in the child's words, whether the lockdown failed
    /// (before the child sent its seccomp listener) or the exec did (after the
    /// supervisor let it through): the child runs in the CLI's memory until its exec,
    /// and its words come back the same.
    fn exec_says_why_a_launch_failed(who) {
        let _g = shared();
        let not_a_program = fixture("not-a-program", b"no ELF, no #!\n");
        set_modes(&[(&not_a_program, 0o755)]);
        let out = rsandbox(who, &["exec", "--", not_a_program.to_str().unwrap()]);
        out.assert_code(11);
        assert!(out.stderr.contains("failed to execute") && out.stderr.contains("Exec format error"), "{out}");
        if who == Who::User {
            let out = rsandbox(who, &["exec", "--nice", "-5", "--", "/bin/true"]);
            out.assert_code(11);
            assert!(out.stderr.contains("failed to lock the sandbox down: failed to set the scheduling priority to nice -5"), "{out}");
        }
    }
);

/// The sandbox's identity switch and non-dumpable step mark the memory the launching
/// child shares with the CLI (`lockdown::command::spawn` clones with `CLONE_VM`): the
/// CLI puts its own dumpability back once the child has exec'd, so an ordinary user's
/// `rsandbox exec` keeps its `/proc` entries (they turn root's when it is not dumpable).
#[test]
fn exec_leaves_the_cli_dumpable() {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    let _g = shared();
    let account = test_user();
    let mut cli = std::process::Command::new(&binaries().cli)
        .args(["exec", "--", "/bin/sh", "-c", "read line"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("RSANDBOX_NO_DAEMON", "1")
        .current_dir("/")
        .uid(account.uid)
        .gid(account.gid)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("rsandbox exec starts");
    running_program_of(&cli);
    // The program's exec shows in its `comm` a moment before the CLI, woken by that exec,
    // has put its dumpability back: look again until it has (the program waits for its
    // line meanwhile), at most a few seconds.
    let fd_dir = format!("/proc/{}/fd", cli.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let owner = loop {
        let owner = std::fs::metadata(&fd_dir).unwrap().uid();
        if owner == account.uid || std::time::Instant::now() > deadline {
            break owner;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    std::io::Write::write_all(cli.stdin.as_mut().unwrap(), b"\n").unwrap();
    assert!(cli.wait().unwrap().success());
    assert_eq!(owner, account.uid, "the CLI's /proc/PID/fd is its user's while its program runs");
}

/// `exec` as root: the program runs in the empty network, IPC and UTS namespaces pinned
/// in `/run/rsandbox-ns` (made by the first call, joined by every later one), never the
/// host's, and two calls' programs share them (issue #26: no namespace made per call).
#[test]
fn exec_as_root_joins_the_pinned_empty_namespaces() {
    use std::fs;
    let _g = shared();
    let namespaces_of_a_running_program = || {
        let mut cli = std::process::Command::new(&binaries().cli)
            .args(["exec", "--", "/bin/sh", "-c", "read line"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("rsandbox exec starts");
        let program = running_program_of(&cli);
        let links = ["net", "ipc", "uts"].map(|ns| fs::read_link(format!("/proc/{program}/ns/{ns}")).unwrap());
        std::io::Write::write_all(cli.stdin.as_mut().unwrap(), b"\n").unwrap();
        assert!(cli.wait().unwrap().success());
        links
    };
    let first = namespaces_of_a_running_program();
    let second = namespaces_of_a_running_program();
    assert_eq!(first, second, "two calls share the pinned namespaces");
    for (ns, link) in ["net", "ipc", "uts"].iter().zip(&first) {
        assert_ne!(link, &fs::read_link(format!("/proc/self/ns/{ns}")).unwrap(), "{ns}: not the host's");
        let pinned = std::os::unix::fs::MetadataExt::ino(&fs::metadata(format!("/run/rsandbox-ns/{ns}")).unwrap());
        assert_eq!(link.to_str().unwrap(), format!("{ns}:[{pinned}]"), "{ns}: the pinned one");
    }
}

/// `exec` as root copies a private root built once and pinned in `/run/rsandbox-ns`
/// (issue #26: no root built per call): calls within the template's age share its
/// read-only overlays (`/usr` is on the pinned template's overlay, whose device no other
/// overlay can have while the pin holds it), each still with a workspace of its own; an
/// expired template, or a stamp that names another shape, is built again (a new mount
/// namespace at the pin).
#[test]
fn exec_as_root_copies_a_pinned_root_template() {
    use std::fs;
    let _g = exclusive();
    // The device of /usr, and what the workspace holds once this call's file is in it.
    let probe = |name: &str| {
        let code = format!(
            "import os, time; open({name:?}, 'w').close(); time.sleep(0.3); \
             print(os.stat('/usr').st_dev, sorted(os.listdir('.')))"
        );
        let out = rsandbox(Who::Root, &["exec", "--", "/usr/bin/python3", "-c", &code]);
        out.assert_code(0);
        let (dev, listing) = out.stdout.trim().split_once(' ').unwrap_or_else(|| panic!("{out}"));
        assert_eq!(listing, format!("[{name:?}]").replace('"', "'"), "only this call's file:{out}");
        dev.to_string()
    };
    // A workspace left by a killed call (its pid gone) is removed by the next call.
    let mut gone = std::process::Command::new("/bin/true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let shared = std::path::Path::new("/dev/shm/rsandbox-exec-workspaces");
    let left = shared.join(format!("ws-{dead}-1"));
    // Made as `exec` makes it where no call has yet (root's, 0700): a directory of
    // another mode is refused, and the call then goes without a template or a sweep.
    std::os::unix::fs::DirBuilderExt::mode(fs::DirBuilder::new().recursive(true), 0o700).create(&left).unwrap();
    let first = probe("first");
    assert!(!left.exists(), "{} is removed", left.display());
    let python = fs::canonicalize("/usr/bin/python3").unwrap();
    let stamp = fs::read_dir("/run/rsandbox-ns")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "shape")
                && fs::read_to_string(p).is_ok_and(|t| t.contains(python.to_str().unwrap()))
        })
        .expect("a pinned template's stamp names the program");
    let pin = stamp.with_extension("");
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(mounts.contains(&format!(" {} ", pin.display())), "{} is pinned:\n{mounts}", pin.display());
    // The pinned namespace's id (a bound nsfs file has its namespace's inode).
    let pinned = || std::os::unix::fs::MetadataExt::ino(&fs::metadata(&pin).unwrap());
    let before = pinned();
    assert_eq!(probe("second"), first, "a second call copies the same template");
    assert_eq!(pinned(), before, "and pins nothing new");
    let expire = || {
        let old = std::time::SystemTime::now() - Duration::from_secs(120);
        fs::File::options().write(true).open(&stamp).unwrap().set_modified(old).unwrap();
    };
    expire();
    let rebuilt = probe("rebuilt");
    let rebuilt_ns = pinned();
    assert_ne!(rebuilt_ns, before, "an expired template is built again");
    // Two at once, each seeing only its own workspace, both in the one template.
    let concurrent = std::thread::spawn(move || probe("left"));
    let right = probe("right");
    let left = concurrent.join().unwrap();
    assert_eq!((&left, &right), (&rebuilt, &rebuilt), "calls within its age share the template");
    let text = fs::read_to_string(&stamp).unwrap();
    fs::write(&stamp, "another shape").unwrap();
    probe("again");
    assert_ne!(pinned(), rebuilt_ns, "a stamp of another shape is not trusted: built again");
    assert_eq!(fs::read_to_string(&stamp).unwrap(), text, "and stamped again");
}

both!(
    /// `--memory` is the program's whole address space (`RLIMIT_AS`, as `prlimit --as`
    /// sets it): `execve` starts it from nothing, so the size of the `rsandbox` process
    /// that forked it must not be added (it was: 64M gave 79 MiB).
    fn exec_memory_is_the_programs_address_space(who) {
        let _g = shared();
        // dash's `ulimit -v` prints the soft RLIMIT_AS in KiB.
        let out = rsandbox(who, &["exec", "--memory", "64M", "--", "/bin/sh", "-c", "ulimit -v"]);
        out.assert_code(0);
        assert_eq!(out.stdout, format!("{}\n", 64 * 1024), "{out}");
        // Too small for the program's loader: it dies by SIGSEGV before it can say why,
        // and the report names the limit as the likely cause instead of a bare signal.
        let out = rsandbox(who, &["exec", "--memory", "100K", "--", "/bin/true"]);
        out.assert_code(10);
        assert!(
            out.stderr.contains("killed by signal 11 (SIGSEGV), under a memory limit of 100.0 KiB")
                && out.stderr.contains("the limit may be too small for it"),
            "{out}"
        );
    }
);

both!(
    /// The program executes itself only, once: any later exec is a violation, whether
    /// a shell starts `ls`, the ELF interpreter (which Landlock must let run) is asked
    /// to load another program, or a program is written into a memfd.
    fn exec_cannot_start_other_programs(who) {
        let _g = shared();
        let out = rsandbox(who, &["exec", "--json", "--", "/bin/sh", "-c", "/bin/ls"]);
        out.assert_code(9);
        let report = out.stderr_json();
        assert_eq!((report["outcome"].as_str(), report["violation"].as_str()), (Some("violation"), Some("execve")), "{out}");
        let loader = std::fs::canonicalize("/lib64/ld-linux-x86-64.so.2").unwrap();
        let through_loader = format!("import os; os.execv({:?}, ['ld.so', '/usr/bin/id'])", loader.display().to_string());
        let out = rsandbox(who, &["exec", "--json", "--", "/usr/bin/python3", "-c", &through_loader]);
        out.assert_code(9);
        assert_eq!(out.stderr_json()["violation"], "execve", "{out}");
        assert!(!out.stdout.contains("uid="), "{out}");
        let memfd = "import os; fd = os.memfd_create('x'); os.write(fd, open('/usr/bin/id', 'rb').read()); os.execve(fd, ['id'], {})";
        let out = rsandbox(who, &["exec", "--", "/usr/bin/python3", "-c", memfd]);
        out.assert_code(1);
        assert!(out.stderr.contains("PermissionError") && out.stderr.contains("Operation not permitted"), "{out}");
    }
);

both!(
    fn exec_times_out(who) {
        let _g = exclusive();
        let out = rsandbox(who, &["exec", "--timeout", "1", "--", "/bin/sleep", "10"]);
        println!("exec sleep with --timeout 1 as {who:?}: {:.3} s", out.elapsed.as_secs_f64());
        out.assert_code(3);
        assert!(out.stderr.contains("timeout"), "{out}");
        // Cut short: the program would sleep 10 s (not a timing assert; the margin is wide).
        assert!(out.elapsed < Duration::from_secs(9), "took {:?}:{out}", out.elapsed);
        assert_no_sandbox_processes(who, &out);
    }
);

both!(
    fn check_reports_the_layers(who) {
        let _g = shared();
        let out = rsandbox(who, &["check", "--json"]);
        out.assert_code(0);
        let j = out.json();
        let abi = j["landlock_abi"].as_u64().unwrap_or_else(|| panic!("no landlock_abi:{out}"));
        assert!(abi >= 6, "Landlock ABI {abi}:{out}");
        assert_eq!(j["seccomp"], json!(true), "{out}");
        assert_eq!(j["strict_policy_possible"], json!(true), "{out}");
        assert_eq!(j["root"], json!(who == Who::Root), "{out}");
    }
);

// =======================================================================================
// Real work: plots as files, inputs and outputs, script arguments, batches.
// =======================================================================================

both!(
    fn plots_inputs_outputs_and_args(who) {
        let _g = shared();
        let dir = owned_dir(who, "io");
        let (plots, input, output) = (dir.join("plots"), dir.join("data.csv"), dir.join("out"));
        std::fs::write(&input, "a,b\n1,2\n").unwrap();
        let script = dir.join("job.R");
        std::fs::write(&script, concat!(
            "args <- commandArgs(trailingOnly = TRUE)\n",
            "d <- read.csv('data.csv')\n",
            "write.csv(d * as.numeric(args[1]), 'scaled.csv', row.names = FALSE)\n",
            "dir.create('sub'); writeLines(args[2], 'sub/note.txt')\n",
            "invisible(file.symlink('/etc/passwd', 'pw'))\n",
            "plot(1:3); plot(3:1)\n",
            "cat(args, sep = ' ')\n",
        )).unwrap();
        let out = rsandbox(who, &[
            "run", "--plots", plots.to_str().unwrap(), "--input", input.to_str().unwrap(),
            "--output", output.to_str().unwrap(), script.to_str().unwrap(), "--", "10", "hello world",
        ]);
        out.assert_code(0);
        assert_eq!(out.stdout, "10 hello world", "{out}");
        for n in ["Rplot001.png", "Rplot002.png"] {
            let png = std::fs::read(plots.join(n)).unwrap_or_else(|e| panic!("{n}: {e}{out}"));
            assert_eq!(&png[..4], b"\x89PNG", "{n}");
        }
        assert_eq!(std::fs::read_to_string(output.join("scaled.csv")).unwrap(), "\"a\",\"b\"\n10,20\n");
        assert_eq!(std::fs::read_to_string(output.join("sub/note.txt")).unwrap(), "hello world\n");
        assert!(output.join("data.csv").is_file(), "inputs are workspace files too");
        assert!(!output.join("pw").exists(), "a symlink the sandbox made is not followed out");
        // With --json the plots stay in the result and nothing is written.
        let (out, j) = eval_json(who, &["--plots", dir.join("none").to_str().unwrap()], "plot(1)");
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["plots"].as_array().map(Vec::len), Some(1));
        assert!(!dir.join("none").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
);

both!(
    fn a_batch_runs_every_file_and_reports_the_worst(who) {
        let _g = shared();
        let dir = owned_dir(who, "batch");
        for i in 0..12 {
            std::fs::write(dir.join(format!("ok{i:02}.R")), format!("cat({i} * 2)")).unwrap();
        }
        std::fs::write(dir.join("fails.R"), "stop('student error')").unwrap();
        std::fs::write(dir.join("hostile.R"), "system('id')").unwrap();
        std::fs::write(dir.join("reads.R"), "readLines('/etc/shadow')").unwrap();
        std::fs::write(dir.join("notes.txt"), "not R").unwrap();
        let out = rsandbox(who, &["run", "--jobs", "2", "--json", dir.to_str().unwrap()]);
        out.assert_code(9); // the worst outcome: a violation
        let lines: Vec<Value> = out.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 15, "one line per R file:{out}");
        let by_file = |name: &str| lines.iter().find(|l| l["file"].as_str().unwrap().ends_with(name)).unwrap().clone();
        assert_eq!(by_file("ok07.R")["stdout"], "14");
        assert_eq!(by_file("fails.R")["outcome"], "error");
        assert_eq!(by_file("hostile.R")["outcome"], "violation");
        assert_eq!(by_file("reads.R")["outcome"], "error");
        assert_eq!(by_file("hostile.R")["exit_status"], 9);
        assert_eq!(by_file("ok07.R")["exit_status"], 0);
        // Three shards of the same directory: every file in exactly one, each shard's
        // exit status the worst of its own files.
        let mut sharded: Vec<String> = Vec::new();
        let mut worst = 0;
        for k in 1..=3 {
            let shard = format!("{k}/3");
            let part = rsandbox(who, &["run", "--jobs", "2", "--shard", &shard, "--json", dir.to_str().unwrap()]);
            let lines: Vec<Value> = part.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(lines.len(), 5, "15 files in 3 round-robin shards:{part}");
            let own_worst = lines.iter().map(|l| l["exit_status"].as_i64().unwrap()).max().unwrap();
            assert_eq!(part.code, Some(own_worst as i32), "{part}");
            worst = worst.max(own_worst);
            sharded.extend(lines.iter().map(|l| l["file"].as_str().unwrap().to_string()));
        }
        sharded.sort();
        let mut all: Vec<String> = lines.iter().map(|l| l["file"].as_str().unwrap().to_string()).collect();
        all.sort();
        assert_eq!(sharded, all);
        assert_eq!(worst, 9);
        let empty = rsandbox(who, &["run", "--shard", "20/20", dir.to_str().unwrap()]);
        empty.assert_code(0);
        assert_eq!(empty.stdout, "", "{empty}");
        let wrong = rsandbox(who, &["run", "--shard", "4/3", dir.to_str().unwrap()]);
        wrong.assert_code(2);
        assert!(wrong.stderr.contains("write K/M"), "{wrong}");
        let summary = rsandbox(who, &["run", dir.join("ok01.R").to_str().unwrap(), dir.join("fails.R").to_str().unwrap()]);
        summary.assert_code(1);
        assert!(summary.stdout.contains("ok01.R: ok") && summary.stdout.contains("fails.R: error"), "{summary}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
);

/// On a terminal (a pty from util-linux `script`), control sequences the sandbox prints
/// are shown as escapes, not sent; into a pipe the bytes are unchanged.
#[test]
fn terminal_escapes_from_the_sandbox_are_shown_not_sent() {
    let _g = shared();
    let code = r#"cat("title\033]0;owned\007 end\n"); message("clear\033[2J")"#;
    let command = format!("{} eval '{}'", env!("CARGO_BIN_EXE_rsandbox"), code.replace('\'', "'\\''"));
    // No daemon, as in every other scenario: a daemon started here outlived the test run
    // by its idle period (10 minutes), its sandboxes stopped between requests.
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("RSANDBOX_NO_DAEMON", "1")
        .output()
        .expect("script (util-linux) runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("title\\x1b]0;owned\\x07 end"), "{shown:?}");
    assert!(shown.contains("clear\\x1b[2J"), "{shown:?}");
    assert!(!shown.contains('\u{1b}'), "an escape reached the terminal: {shown:?}");
    let piped = rsandbox(Who::Root, &["eval", code]);
    assert!(piped.stdout.contains("title\u{1b}]0;owned\u{7} end"), "{piped}");
}

// =======================================================================================
// Profiles (#15, first part): TOML files, limits, the kernel-enforced package allowlist.
// =======================================================================================

fn profile_file(who: Who, name: &str, text: &str) -> String {
    let dir = owned_dir(who, &format!("profile-{name}"));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    if who == Who::User {
        std::os::unix::fs::chown(&path, Some(test_user().uid), Some(test_user().gid)).unwrap();
    }
    path.to_string_lossy().into_owned()
}

both!(
    /// Only the allowed packages (and their dependencies) exist in the sandbox: R finds
    /// no other package, and a path to one leads nowhere.
    fn a_package_allowlist_is_enforced_by_the_kernel(who) {
        let _g = shared();
        let stats_only = profile_file(who, "stats-only", "packages = [\"stats\"]\n");
        let out = rsandbox(who, &["eval", "--profile", &stats_only, "library(Matrix)"]);
        out.assert_code(1);
        assert!(out.stderr.contains("there is no package called"), "{out}");
        let out = rsandbox(who, &["eval", "--json", "--profile", &stats_only,
            "list(median = stats::median(c(1, 5, 9)), on_disk = file.exists(file.path(R.home('library'), 'Matrix', 'DESCRIPTION')))"]);
        out.assert_code(0);
        assert_eq!(out.json()["value"], json!({"median": 5, "on_disk": false}), "{out}");
        let matrix = profile_file(who, "matrix", "packages = [\"Matrix\"]\n");
        let out = rsandbox(who, &["eval", "--json", "--profile", &matrix,
            "library(Matrix); c(lattice = isNamespaceLoaded('lattice'), data.table = requireNamespace('data.table', quietly = TRUE))"]);
        out.assert_code(0);
        assert_eq!(out.json()["value"], json!({"lattice": true, "data.table": false}), "dependencies come along, nothing else:{out}");
        // Without the private root the allowlist could not be enforced: refused.
        let out = rsandbox(who, &["eval", "--no-namespaces", "--profile", &matrix, "1"]);
        out.assert_code(2);
        assert!(out.stderr.contains("needs the private root"), "{out}");
    }
);

#[test]
fn profiles_set_limits_and_bad_ones_are_refused_by_line_and_key() {
    let _g = shared();
    let quick = profile_file(Who::Root, "quick", "[limits]\ntimeout = 1\nmemory = \"256M\"\n");
    let out = rsandbox(Who::Root, &["eval", "--profile", &quick, "Sys.sleep(10)"]);
    out.assert_code(3);
    let out = rsandbox(Who::Root, &["eval", "--profile", &quick, "--timeout", "20", "Sys.sleep(1.5); 'flags win'"]);
    out.assert_code(0);
    let bad = profile_file(Who::Root, "bad", "read = []\nnetwrok = true\n");
    let out = rsandbox(Who::Root, &["eval", "--profile", &bad, "1"]);
    out.assert_code(2);
    assert!(out.stderr.contains("unknown field `netwrok`") && out.stderr.contains("line 2"), "{out}");
    // `network` is a table ([network]), not a switch: the key and its line are named.
    let bad = profile_file(Who::Root, "bad-network", "read = []\nnetwork = true\n");
    let out = rsandbox(Who::Root, &["eval", "--profile", &bad, "1"]);
    out.assert_code(2);
    assert!(out.stderr.contains("network") && out.stderr.contains("line 2"), "{out}");
    let missing = profile_file(Who::Root, "missing", "packages = [\"notapackage\"]\n");
    let out = rsandbox(Who::Root, &["eval", "--profile", &missing, "1"]);
    out.assert_code(2);
    assert!(out.stderr.contains("\"notapackage\" is not installed"), "{out}");
    let out = rsandbox(Who::Root, &["check", "--profile", &quick]);
    out.assert_code(0);
    assert!(out.stdout.contains("every installed package"), "{out}");
}

/// RAppArmor's per-call identity and priority: as root, `--uid`/`--gid` name the
/// identity of every sandbox and `--nice` its priority (negative too); `layers` and
/// `check` say so. Refused: uid or gid 0, a login account's uid (unless
/// --allow-login-uid), --uid from an ordinary user, a nice value out of range.
#[test]
fn uid_gid_and_nice_apply_and_bad_ones_are_refused() {
    let _g = shared();
    let (out, j) = eval_json(
        Who::Root,
        &["--uid", "2100000123", "--gid", "2100000124", "--nice", "7"],
        "c(tools::psnice(Sys.getpid()), 1L)",
    );
    assert_outcome(&out, &j, "ok", 0);
    assert_eq!(j["value"], json!([7, 1]), "{out}");
    assert_eq!(j["layers"]["identity"], json!({"uid": 2100000123u32, "gid": 2100000124u32}), "{out}");
    assert_eq!(j["layers"]["nice"], json!(7), "{out}");
    // Root may also raise the priority (before the privilege drop); the sandbox may not.
    let (out, j) = eval_json(Who::Root, &["--nice", "-5"], "tools::psnice(Sys.getpid())");
    assert_eq!(j["value"], json!(-5), "{out}");
    let (out, j) = eval_json(
        Who::Root,
        &["--nice", "5"],
        "c(tools::psnice(Sys.getpid(), value = 0), tools::psnice(Sys.getpid()))",
    );
    assert_eq!(j["value"], json!([5, 5]), "asking for nice 0 from inside changes nothing:{out}");
    let out = rsandbox(Who::Root, &["check", "--uid", "2100000200", "--nice", "5"]);
    out.assert_code(0);
    assert!(
        out.stdout.contains("uid 2100000200 gid 2100000200 for every sandbox") && out.stdout.contains("nice 5"),
        "{out}"
    );

    assert_rejected(Who::Root, &["eval", "--uid", "0", "1"], "0 is root");
    assert_rejected(Who::Root, &["eval", "--uid", "2100000123", "--gid", "0", "1"], "0 is root");
    assert_rejected(Who::Root, &["eval", "--nice", "20", "1"], "20 is not in -20..=19");
    assert_rejected(Who::Root, &["eval", "--gid", "5", "1"], "--uid");
    let test_user_uid = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{}:x:", common::TEST_USER)).and_then(|r| r.split(':').next().map(str::to_string))
        })
        .expect("the test user exists");
    assert_rejected(Who::Root, &["eval", "--uid", &test_user_uid, "1"], "is the login account rsandbox-test");
    let (out, j) = eval_json(Who::Root, &["--uid", &test_user_uid, "--allow-login-uid"], "1");
    assert_outcome(&out, &j, "ok", 0);
    assert_rejected(Who::User, &["eval", "--uid", "2100000123", "1"], "needs a supervisor running as root");
}

/// A profile's `libraries` (and the built-in `base`, which adds the caller's own R
/// libraries) make packages installed there loadable in the sandbox; a package
/// allowlist still hides what it does not list.
#[test]
fn profile_libraries_and_the_base_profile_reach_user_installed_packages() {
    let _g = shared();
    let dir = std::env::temp_dir().join(format!("rsandbox-libraries-{}", std::process::id()));
    let (src, lib) = (dir.join("src/tinypkg"), dir.join("lib"));
    std::fs::create_dir_all(src.join("R")).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(src.join("DESCRIPTION"), "Package: tinypkg\nVersion: 0.1\nTitle: Tiny\nDescription: A test package.\nLicense: MIT\nAuthor: t\nMaintainer: t <t@example.org>\n").unwrap();
    std::fs::write(src.join("NAMESPACE"), "export(tiny)\n").unwrap();
    std::fs::write(src.join("R/tiny.R"), "tiny <- function() 'tiny says hi'\n").unwrap();
    let installed = std::process::Command::new("R")
        .args(["CMD", "INSTALL", "-l"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("R CMD INSTALL runs");
    assert!(installed.status.success(), "{}", String::from_utf8_lossy(&installed.stderr));
    let with = |text: &str| {
        let path = dir.join("p.toml");
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let code = "library(tinypkg); tiny()";
    let out = rsandbox(Who::Root, &["eval", code]);
    out.assert_code(1);
    assert!(out.stderr.contains("there is no package called"), "{out}");
    let lib_str = lib.to_string_lossy().into_owned();
    let out = rsandbox(Who::Root, &["eval", "--profile", &with(&format!("libraries = [\"{lib_str}\"]\n")), code]);
    out.assert_code(0);
    assert!(out.stdout.contains("tiny says hi"), "{out}");
    let out = rsandbox_with(Who::Root, &["eval", "--profile", "base", code], &[("R_LIBS_USER", &lib_str)], None);
    out.assert_code(0);
    assert!(out.stdout.contains("tiny says hi"), "{out}");
    let out = rsandbox(
        Who::Root,
        &["eval", "--profile", &with(&format!("libraries = [\"{lib_str}\"]\npackages = [\"stats\"]\n")), code],
    );
    out.assert_code(1);
    assert!(out.stderr.contains("there is no package called"), "the allowlist hides it:{out}");
    let out = rsandbox(Who::Root, &["eval", "--profile", &with("libraries = [\"/nonexistent/lib\"]\n"), "1"]);
    out.assert_code(2);
    assert!(out.stderr.contains("/nonexistent/lib is not a directory"), "{out}");
    let out = rsandbox_with(Who::Root, &["check", "--profile", "base"], &[("R_LIBS_USER", &lib_str)], None);
    assert!(out.stdout.contains(&format!("also {lib_str}")), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `rsandbox learn`: five realistic scripts. What it prints (stdout, TOML) is a profile
/// under which `run` then succeeds.
#[test]
fn learn_prints_a_profile_the_code_then_runs_under() {
    let _g = shared();
    let dir = std::env::temp_dir().join(format!("rsandbox-learn-{}", std::process::id()));
    let (data, lib, src) = (dir.join("data"), dir.join("lib"), dir.join("src/learnpkg"));
    for d in [&data, &lib, &src.join("R")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(data.join("scores.csv"), "student,score\nada,91\nbob,78\ncy,85\n").unwrap();
    // A file read but not there (on the host either) is the code's own error: nothing
    // is learned for it, neither a read nor a write.
    let missing = dir.join("missing.R");
    std::fs::write(&missing, format!("read.csv('{}')", data.join("nope.csv").display())).unwrap();
    let out = rsandbox(Who::Root, &["learn", missing.to_str().unwrap()]);
    out.assert_code(1);
    assert!(
        out.stdout.is_empty() && out.stderr.contains("an error learning cannot fix") && !out.stderr.contains("added"),
        "{out}"
    );
    std::fs::write(src.join("DESCRIPTION"), "Package: learnpkg\nVersion: 0.1\nTitle: T\nDescription: A test package.\nLicense: MIT\nAuthor: t\nMaintainer: t <t@example.org>\n").unwrap();
    std::fs::write(src.join("NAMESPACE"), "export(grade)\n").unwrap();
    std::fs::write(src.join("R/grade.R"), "grade <- function(x) ifelse(x >= 85, 'A', 'B')\n").unwrap();
    let installed =
        std::process::Command::new("R").args(["CMD", "INSTALL", "-l"]).arg(&lib).arg(&src).output().unwrap();
    assert!(installed.status.success(), "{}", String::from_utf8_lossy(&installed.stderr));
    let csv = data.join("scores.csv").to_string_lossy().into_owned();
    // Where the report is written: as root each sandbox has a uid of its own.
    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::set_permissions(&reports, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let report = reports.join("top.csv").to_string_lossy().into_owned();
    let lib_env = [("R_LIBS_USER", lib.to_str().unwrap())];
    let scripts = [
        ("csv", format!("d <- read.csv('{csv}'); mean(d$score)"), "84.666"),
        ("model", "fit <- lm(mpg ~ wt, data = mtcars); round(coef(fit)[['wt']], 2)".to_string(), "-5.34"),
        ("plot", "png('out.png'); hist(rnorm(100)); invisible(dev.off()); file.exists('out.png')".to_string(), "TRUE"),
        ("package", format!("library(learnpkg); d <- read.csv('{csv}'); paste(grade(d$score), collapse = '')"), "ABA"),
        (
            "report",
            format!("d <- read.csv('{csv}'); write.csv(d[d$score > 80, ], '{report}', row.names = FALSE); nrow(d)"),
            "3",
        ),
    ];
    for (name, code, expected) in &scripts {
        let file = dir.join(format!("{name}.R"));
        std::fs::write(&file, code).unwrap();
        let out = rsandbox_with(Who::Root, &["learn", file.to_str().unwrap()], &lib_env, None);
        out.assert_code(0);
        assert!(
            out.stdout.starts_with("# learned by rsandbox learn") && out.stdout.contains("[limits]"),
            "{name}:{out}"
        );
        let profile = dir.join(format!("{name}.toml"));
        std::fs::write(&profile, &out.stdout).unwrap();
        std::fs::remove_file(&report).ok();
        let run = rsandbox(Who::Root, &["run", "--profile", profile.to_str().unwrap(), file.to_str().unwrap()]);
        run.assert_code(0);
        assert!(run.stdout.contains(expected), "{name}: the learned profile lets it run:{run}\n{}", out.stdout);
        match *name {
            "csv" => assert!(out.stdout.contains(&format!("read = [\"{}\"]", data.display())), "{out}"),
            "package" => assert!(
                out.stdout.contains("packages = [\"learnpkg\"]") && out.stdout.contains("libraries = ["),
                "{out}"
            ),
            "report" => {
                assert!(out.stdout.contains(&format!("write = [\"{}\"]", reports.display())), "{out}");
                assert_eq!(
                    std::fs::read_to_string(&report).unwrap().lines().count(),
                    3,
                    "the learned profile lets it write its report"
                );
            }
            "model" | "plot" => assert!(!out.stdout.contains("read = "), "nothing outside R was read:{out}"),
            _ => {}
        }
    }
    // A compiled function: learned under the compile profile, plus the one program
    // (`id`) that profile does not list (the shell's complaint goes to /dev/null: the
    // kernel's refusal is what is seen); the learned profile then runs it.
    let file = dir.join("compiled.R");
    std::fs::write(
        &file,
        "writeLines('int f(void){return 1;}', 'f.c'); stopifnot(system('R CMD SHLIB f.c') == 0); \
         me <- suppressWarnings(system('id -u 2>/dev/null', intern = TRUE)); dyn.load(file.path(getwd(), 'f.so')); c(is.loaded('f'), nchar(me) > 0)",
    )
    .unwrap();
    let out = rsandbox(Who::Root, &["learn", file.to_str().unwrap()]);
    out.assert_code(0);
    assert!(out.stdout.contains("extends = \"compile\"") && out.stdout.contains("exec = [\"/usr/bin/id\"]"), "{out}");
    assert!(out.stderr.contains("it ran a program (execve)"), "{out}");
    let profile = dir.join("compiled.toml");
    std::fs::write(&profile, &out.stdout).unwrap();
    let run = rsandbox(Who::Root, &["run", "--profile", profile.to_str().unwrap(), file.to_str().unwrap()]);
    run.assert_code(0);
    assert!(run.stdout.contains("TRUE TRUE"), "{run}");
    std::fs::remove_dir_all(&dir).ok();
}

both!(
    /// `learn` sees what the kernel refused, not what R said: a read the code survives
    /// silently is learned, and a forbidden call is refused with an error, listed, and
    /// makes the learning fail (no profile grants it). With and without namespaces.
    fn learn_records_what_the_kernel_refused(who) {
        let _g = shared();
        let dir = owned_dir(who, "learn-kernel");
        let private = dir.join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::write(private.join("notes.txt"), "kept on the host\n").unwrap();
        let notes = private.join("notes.txt").display().to_string();
        let silent = dir.join("silent.R");
        std::fs::write(&silent, format!("suppressWarnings(tryCatch(readLines('{notes}'), error = function(e) 'none'))")).unwrap();
        let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("the C library");
        let forbidden = dir.join("forbidden.R");
        std::fs::write(&forbidden, format!("dyn.load('{libc}'); r <- .C('unshare', 0L); 'went on'")).unwrap();
        set_modes(&[(&dir, 0o755), (&private, 0o755), (&private.join("notes.txt"), 0o644), (&silent, 0o644), (&forbidden, 0o644)]);
        for namespaces in [true, false] {
            let extra: &[&str] = if namespaces { &[] } else { &["--no-namespaces"] };
            fn args<'a>(verb: &'a str, extra: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
                [&[verb][..], extra, rest].concat()
            }
            // Without learning the code runs, and misses the file.
            let out = rsandbox(who, &args("run", extra, &[silent.to_str().unwrap()]));
            out.assert_code(0);
            assert!(out.stdout.contains("none"), "{out}");
            let out = rsandbox(who, &args("learn", extra, &[silent.to_str().unwrap()]));
            out.assert_code(0);
            assert!(out.stdout.contains(&format!("read = [\"{}\"]", private.display())), "{out}");
            assert!(out.stderr.contains(&format!("it was refused {notes}")), "{out}");
            let profile = profile_file(who, &format!("silent-{namespaces}"), &out.stdout);
            let run = rsandbox(who, &args("run", extra, &["--profile", &profile, silent.to_str().unwrap()]));
            run.assert_code(0);
            assert!(run.stdout.contains("kept on the host"), "the learned profile lets it read the file:{run}");
            // The forbidden call: refused and listed in learning, and the code went on.
            let out = rsandbox(who, &args("learn", extra, &[forbidden.to_str().unwrap()]));
            out.assert_code(1);
            assert!(out.stdout.contains("# forbidden system calls the code made") && out.stdout.contains(": unshare"), "{out}");
            assert!(out.stderr.contains("no profile lets this code run"), "{out}");
            let run = rsandbox(who, &args("run", extra, &[forbidden.to_str().unwrap()]));
            run.assert_code(9);
        }
        std::fs::remove_dir_all(&dir).ok();
    }
);

both!(
    /// The compile profile: `R CMD SHLIB` builds C and C++ that R then loads; a program
    /// it does not list, and one copied or compiled into the workspace, fail to start;
    /// under strict, running any program ends the sandbox.
    fn the_compile_profile_builds_c_code_and_unlisted_programs_still_fail(who) {
        let _g = shared();
        let code = r#"
writeLines(c('#include <R.h>', 'void twice(double *x, int *n) { for (int i = 0; i < *n; i++) x[i] *= 2; }'), 'twice.c')
writeLines(c('extern "C" void thrice(double *x) { *x *= 3; }'), 'thrice.cpp')
built <- system('R CMD SHLIB twice.c') == 0 && system('R CMD SHLIB thrice.cpp') == 0
dyn.load(file.path(getwd(), 'twice.so')); dyn.load(file.path(getwd(), 'thrice.so'))
writeLines('int main(void) { return 0; }', 'hello.c')
compiled <- system('gcc -o hello hello.c') == 0
copied <- file.copy('/usr/bin/true', 'mytrue') && Sys.chmod('mytrue', '755') == TRUE
list(built = built, twice = .C('twice', x = c(1, 2), n = 2L)$x, thrice = .C('thrice', x = 2)$x,
     unlisted = system('id -u >/dev/null 2>&1'), compiled = compiled, own = system('./hello 2>/dev/null'),
     copied = system('./mytrue 2>/dev/null'))
"#;
        let (out, j) = eval_json(who, &["--profile", "compile", "--timeout", "120"], code);
        assert_outcome(&out, &j, "ok", 0);
        // 126: the shell found the program but may not execute it.
        assert_eq!(j["value"], json!({"built": true, "twice": [2, 4], "thrice": 6, "unlisted": 126, "compiled": true, "own": 126, "copied": 126}), "{out}");
        assert!(j["layers"]["programs"].as_u64().is_some_and(|n| n > 10), "{out}");
        let (out, j) = eval_json(who, &[], "system('true')");
        assert_outcome(&out, &j, "violation", 9);
        assert_eq!(j["violation"]["syscall"], "execve", "{out}");
        assert!(j["layers"].get("programs").is_none(), "{out}");
        let out = rsandbox(who, &["check", "--profile", "compile"]);
        out.assert_code(0);
        assert!(out.stdout.contains("programs         only these may be executed") && out.stdout.contains("/usr/bin/make"), "{out}");
        let out = rsandbox(who, &["check"]);
        assert!(out.stdout.contains("programs         none (execve is a violation"), "{out}");
    }
);

both!(
    /// A profile's `write`: the sandbox writes below the listed directory (read-write
    /// inside a read-only `read` tree) and nowhere else; system and temporary roots are
    /// refused; `check` says it.
    fn a_profile_write_directory_is_writable_and_nothing_else(who) {
        let _g = shared();
        let dir = owned_dir(who, "write");
        let (data, out) = (dir.join("data"), dir.join("data/out"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(data.join("in.txt"), "from the host\n").unwrap();
        // As root each sandbox has a uid of its own: the directory must let it write.
        set_modes(&[(&out, 0o1777), (&dir, 0o755), (&data, 0o755), (&data.join("in.txt"), 0o644)]);
        let (data_s, out_s) = (data.display().to_string(), out.display().to_string());
        let profile = profile_file(who, "writer", &format!("read = [\"{data_s}\"]\nwrite = [\"{out_s}\"]\n"));
        let code = format!(
            "writeLines(toupper(readLines('{data_s}/in.txt')), '{out_s}/result.txt'); \
             c(beside = file.create('{data_s}/beside.txt', showWarnings = FALSE), home = file.create('~/../escape.txt', showWarnings = FALSE))"
        );
        let (out, j) = eval_json(who, &["--profile", &profile], &code);
        assert_outcome(&out, &j, "ok", 0);
        assert_eq!(j["value"], json!({"beside": false, "home": false}), "{out}");
        assert_eq!(std::fs::read_to_string(dir.join("data/out/result.txt")).unwrap(), "FROM THE HOST\n");
        assert!(!data.join("beside.txt").exists());
        let out = rsandbox(who, &["check", "--profile", &profile]);
        assert!(out.stdout.contains(&format!("also writable    {out_s}")), "{out}");
        let tmp = profile_file(who, "write-tmp", "write = [\"/tmp\"]\n");
        let out = rsandbox(who, &["eval", "--profile", &tmp, "1"]);
        out.assert_code(2);
        assert!(out.stderr.contains("system or temporary root"), "{out}");
        std::fs::remove_dir_all(&dir).ok();
    }
);

/// An error can quote what the sandbox chose (a file name under --output): on a
/// terminal its control characters are shown, never sent.
#[test]
fn an_error_quoting_sandbox_text_is_inert_on_a_terminal() {
    let _g = shared();
    let out_dir = fixture("marker-inert", b"").with_file_name("inert-output");
    std::fs::remove_dir_all(&out_dir).ok();
    std::fs::create_dir(&out_dir).unwrap();
    // The host already has a file where the sandbox's directory would go.
    std::fs::write(out_dir.join("\u{1b}[2Jz"), "host").unwrap();
    let command = format!(
        "RSANDBOX_NO_DAEMON=1 {} eval --output {} \"dir.create('\\\\033[2Jz'); file.create('\\\\033[2Jz/f')\"",
        binaries().cli.display(),
        out_dir.display()
    );
    let out = std::process::Command::new("script").args(["-qec", &command, "/dev/null"]).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("exists and is not a directory"), "{shown:?}");
    assert!(shown.contains("\\x1b[2Jz"), "shown as an escape: {shown:?}");
    assert!(!shown.contains('\u{1b}'), "sent raw to the terminal: {shown:?}");
    std::fs::remove_dir_all(&out_dir).ok();
}

/// `serve --stdio` keeps a workspace's host directory, only a mount point when it has a
/// disk quota, on `/dev/shm` (a tmpfs: cheap to make and remove), and leaves no directory
/// behind when its client goes, even while a sandbox is being forked ahead.
#[test]
fn serve_keeps_mount_points_in_memory_and_leaves_no_directory_behind() {
    use std::io::{BufRead, BufReader, Write};
    let _g = shared();
    let mut server = std::process::Command::new(&binaries().cli)
        .args(["serve", "--stdio"])
        .env_remove("TMPDIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let prefix = format!("rsandbox-{}-", server.id());
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    writeln!(stdin, "{}", json!({"op": "eval", "id": 1, "code": "getwd()"})).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    let workspace = answer["result"]["value"].as_str().unwrap_or_default().to_string();
    let shm_is_tmpfs = std::fs::read_to_string("/proc/mounts").unwrap().lines().any(|m| m.contains(" /dev/shm tmpfs "));
    if shm_is_tmpfs {
        assert!(workspace.starts_with(&format!("/dev/shm/{prefix}")), "{answer}");
    }
    // Gone at once: the replacement for the sandbox just used is being forked.
    drop(stdin);
    assert!(server.wait().unwrap().success());
    let left = common::engine_dirs::engine_dirs_of(server.id());
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// An engine killed by SIGKILL cannot remove its directories; the next engine to start
/// removes them (they are no engine's any more: their lock is free).
#[test]
fn the_next_engine_removes_what_a_killed_one_left() {
    use std::io::{BufRead, BufReader, Write};
    let _g = shared();
    let serve = || {
        std::process::Command::new(&binaries().cli)
            .args(["serve", "--stdio"])
            .env_remove("TMPDIR")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut killed = serve();
    let mut stdin = killed.stdin.take().unwrap();
    let mut stdout = BufReader::new(killed.stdout.take().unwrap());
    writeln!(stdin, "{}", json!({"op": "eval", "id": 1, "code": "writeLines('x', 'f.txt'); getwd()"})).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"outcome\":\"ok\""), "{line}");
    killed.kill().unwrap();
    killed.wait().unwrap();
    let left = common::engine_dirs::engine_dirs_of(killed.id());
    assert!(!left.is_empty(), "a killed engine leaves its directories (nothing to test otherwise)");

    let mut next = serve();
    let mut stdin = next.stdin.take().unwrap();
    let mut stdout = BufReader::new(next.stdout.take().unwrap());
    writeln!(stdin, "{}", json!({"op": "eval", "id": 1, "code": "1 + 1"})).unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"outcome\":\"ok\""), "{line}");
    let still = common::engine_dirs::engine_dirs_of(killed.id());
    assert!(still.is_empty(), "the next engine left {still:?}");
    drop(stdin);
    assert!(next.wait().unwrap().success());
}

/// `serve`, `mcp` and the daemon run in `rsandbox-server` beside `rsandbox`: `rsandbox
/// serve` becomes that binary in its own process (the pid its caller holds is the
/// server's, and it serves), and without it the command says where it looked and what
/// to do, while the other commands run as before.
#[test]
fn serve_runs_in_the_server_binary_beside_the_cli() {
    use std::io::{BufRead, Write};
    use std::process::{Command, Stdio};
    let mut serve = Command::new(env!("CARGO_BIN_EXE_rsandbox"))
        .args(["serve", "--stdio"])
        .env_remove("RSANDBOX_SERVER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let exe = format!("/proc/{}/exe", serve.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_link(&exe).is_ok_and(|p| p.ends_with("rsandbox-server")) {
        assert!(std::time::Instant::now() < deadline, "{exe} never became rsandbox-server");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut stdin = serve.stdin.take().unwrap();
    writeln!(stdin, r#"{{"op": "eval", "id": 1, "code": "1+1"}}"#).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(serve.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(answer["result"]["value"], json!(2), "{answer}");
    drop(stdin);
    assert!(serve.wait().unwrap().success());

    // `rsandbox` alone in a directory.
    let dir = std::env::temp_dir().join(format!("rsandbox-cli-alone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let alone = dir.join("rsandbox");
    std::fs::copy(env!("CARGO_BIN_EXE_rsandbox"), &alone).unwrap();
    let out = Command::new(&alone).args(["serve", "--stdio"]).env_remove("RSANDBOX_SERVER").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(11), "{stderr}");
    assert!(
        stderr.contains(&format!("{} not found", dir.join("rsandbox-server").display()))
            && stderr.contains("set RSANDBOX_SERVER"),
        "{stderr}"
    );
    let out = Command::new(&alone).args(["exec", "--", "/bin/true"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Both binaries are static PIEs (`build.rs`, or musl's own linking for the release
/// command under `RSANDBOX_TEST_CLI`: every command's process start is the
/// floor under `exec`): no program interpreter to load, and still what the dynamic
/// link gave the supervisor's own code: a position-independent executable (a random
/// load address), read-only relocations (`PT_GNU_RELRO`) and every symbol bound at start
/// (`DF_1_NOW`).
#[test]
fn the_binaries_are_static_pies_with_full_relro() {
    let cli = cli_under_test::cli_under_test();
    for binary in [cli.to_str().unwrap(), env!("CARGO_BIN_EXE_rsandbox-server")] {
        assert_static_pie_with_full_relro(binary);
    }
}

/// `--version` names the C library; the release command as `scripts/build-release.sh`
/// leaves it (`RSANDBOX_TEST_CLI`, with `RSANDBOX_TEST_CLI_LIBC`) is the one it says.
#[test]
fn the_command_says_which_c_library_it_was_built_against() {
    let out = std::process::Command::new(cli_under_test::cli_under_test()).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    let expected = std::env::var("RSANDBOX_TEST_CLI_LIBC").unwrap_or_else(|_| "glibc".to_string());
    assert_eq!(version.trim(), format!("rsandbox {} ({expected})", env!("CARGO_PKG_VERSION")));
}

fn assert_static_pie_with_full_relro(binary: &str) {
    let elf = std::fs::read(binary).unwrap();
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    assert_eq!(&elf[..5], b"\x7fELF\x02", "{binary}: not a 64-bit ELF file");
    const ET_DYN: u16 = 3;
    assert_eq!(u16_at(0x10), ET_DYN, "{binary}: not position-independent");
    let (table, size, count) = (u64_at(0x20), u16_at(0x36) as usize, u16_at(0x38) as usize);
    let headers: Vec<(u32, usize, usize)> =
        (0..count).map(|i| table + i * size).map(|h| (u32_at(h), u64_at(h + 8), u64_at(h + 32))).collect();
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    const PT_GNU_RELRO: u32 = 0x6474_e552;
    assert!(
        headers.iter().all(|h| h.0 != PT_INTERP),
        "{binary}: the binary names a program interpreter: linked dynamically"
    );
    assert!(headers.iter().any(|h| h.0 == PT_GNU_RELRO), "{binary}: no PT_GNU_RELRO");
    // The dynamic section's (tag, value) pairs: no DT_NEEDED library, and DF_1_NOW.
    let &(_, offset, length) = headers.iter().find(|h| h.0 == PT_DYNAMIC).expect("a static PIE has a dynamic section");
    let entries: Vec<(u64, u64)> =
        (offset..offset + length).step_by(16).map(|e| (u64_at(e) as u64, u64_at(e + 8) as u64)).collect();
    const DT_NEEDED: u64 = 1;
    const DT_FLAGS_1: u64 = 0x6fff_fffb;
    const DF_1_NOW: u64 = 1;
    assert!(entries.iter().all(|e| e.0 != DT_NEEDED), "{binary}: the binary needs a shared library");
    assert!(
        entries.iter().any(|&(tag, value)| tag == DT_FLAGS_1 && value & DF_1_NOW != 0),
        "{binary}: symbols not bound at start"
    );
}
