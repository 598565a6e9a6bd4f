//! The function allowlist (a profile's `functions`): escape attempts are refused before
//! they run (exit 2, naming the first function not allowed) or fail where they run
//! (nothing but the allowed functions exists there), and legitimate programs written
//! with the allowed sets work. As root and as an ordinary user.
//!
//! Every escape tries to reach something outside the list; the sandbox's kernel walls
//! would hold anyway: this layer is a convenience on top of them, and the tests check
//! that it keeps its own promise.

#[macro_use]
mod common;

use common::*;
use serde_json::Value;

/// The profile every case runs under, written where `who` can read it.
fn profile(who: Who) -> String {
    let dir = std::env::temp_dir().join(format!("rsandbox-functions-{}-{who:?}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("calc.toml");
    std::fs::write(&path, "functions = [\"arithmetic\", \"data-frames\", \"plotting\"]\n").unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&dir, mode).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    path.to_string_lossy().into_owned()
}

/// (what, code, the name refused statically — or "" when it fails where it runs).
const ESCAPES: &[(&str, &str, &str)] = &[
    ("a direct call", "system('id')", "system"),
    ("a call under another name", "f <- system; f('id')", "system"),
    ("get by name", "get('system')('id')", "get"),
    ("match.fun by name", "match.fun('system')('id')", "match.fun"),
    ("do.call with a string", "do.call('system', list('id'))", "do.call"),
    ("pkg::fun", "base::system('id')", "::"),
    ("pkg:::fun", "base:::system('id')", ":::"),
    ("eval(parse(text = ...))", "eval(parse(text = \"system('id')\"))", "eval"),
    ("eval(quote(...))", "eval(quote(Sys.getpid()))", "eval"),
    ("a function as an argument", "sapply('id', system)", "system"),
    ("sapply with a name as a string", "sapply(1, 'Sys.getpid')", ""),
    ("lapply with a name in a variable", "x <- 'Sys.getpid'; lapply(1, x)", ""),
    ("Reduce with a name as a string", "Reduce('Sys.getpid', 1:3)", ""),
    ("Map with a name as a string", "Map('Sys.getenv', 'HOME')", ""),
    ("sapply reaching :: by string", "sapply('base', '::', 'system')", ""),
    ("the environment of an allowed closure", "environment(mean)", "environment"),
    ("walking up from here", "parent.env(environment())", "parent.env"),
    ("sys.function", "sys.function()", "sys.function"),
    ("parent.frame", "parent.frame()", "parent.frame"),
    ("globalenv()", "globalenv()", "globalenv"),
    ("the global environment by name", ".GlobalEnv", ""),
    ("the base namespace by name", ".BaseNamespaceEnv", ""),
    ("as.environment", "as.environment(1)", "as.environment"),
    ("asNamespace", "asNamespace('base')", "asNamespace"),
    ("an anonymous function returning a forbidden one", "(function() system)()('id')", "system"),
    ("indexing a list of functions", "list(Sys.getpid)[[1]]()", "Sys.getpid"),
    ("a forbidden call inside with()", "with(list(a = 1), Sys.getpid())", "Sys.getpid"),
    ("an S3 method that calls out", "mean.evil <- function(x, ...) Sys.getpid(); mean(structure(1, class = 'evil'))", "Sys.getpid"),
    ("body of a closure", "body(mean)", "body"),
    ("library()", "library(parallel)", "library"),
    ("reading a file", "readLines('/etc/passwd')", "readLines"),
    ("the environment of a formula", "f <- y ~ x; environment(f)", "environment"),
    ("assign into the global environment", "assign('x', 1, envir = globalenv())", "assign"),
    ("tryCatch to inspect a call", "tryCatch(stop('x'), error = function(e) conditionCall(e))", "tryCatch"),
    ("a forbidden call in a loop body", "for (i in 1:2) Sys.time()", "Sys.time"),
];

/// (what, code, the value in the JSON result).
const LEGIT: &[(&str, &str, &str)] = &[
    ("mean and sum", "x <- c(2, 4, 9); mean(x) + sum(x)", "20"),
    ("a recursive function", "fact <- function(n) if (n <= 1) 1 else n * fact(n - 1); fact(5)", "120"),
    ("sapply with a closure", "sapply(1:4, function(i) i^2)", "[1,4,9,16]"),
    ("a data frame subset and order", "df <- data.frame(a = 3:1, b = c(9, 8, 7)); df[order(df$a), 'b'][1]", "7"),
    ("aggregate without a formula", "df <- data.frame(g = c('x', 'y', 'x'), v = 1:3); aggregate(df$v, by = list(g = df$g), FUN = mean)$x", "[2,2]"),
    ("table of letters", "as.integer(table(c('a', 'b', 'a'))['a'])", "2"),
    ("paste and sprintf", "paste0(sprintf('%.1f', pi), '-', toupper('ok'))", "\"3.1-OK\""),
    ("merge two data frames", "nrow(merge(data.frame(k = 1:3, a = 1), data.frame(k = 2:4, b = 2)))", "2"),
    ("cumsum and round", "round(cumsum(c(0.25, 0.5, 0.25)), 1)", "[0.2,0.8,1]"),
    ("tapply by group", "as.numeric(tapply(c(1, 2, 3, 4), c('a', 'b', 'a', 'b'), sum))", "[4,6]"),
    ("a plot", "plot(1:10, main = 'ok'); 'drawn'", "\"drawn\""),
    ("state in a session-like sequence", "x <- 1:10; x <- x[x %% 2 == 0]; length(x)", "5"),
];

both!(
    fn escapes_are_refused_or_find_nothing(who) {
        let _g = shared();
        let profile = profile(who);
        let mut problems = Vec::new();
        for (what, code, refused) in ESCAPES {
            let out = rsandbox(who, &["eval", "--profile", &profile, "--json", code]);
            let fine = if refused.is_empty() {
                // Ran, and found nothing: an R error, no value.
                out.code == Some(1) && out.json()["outcome"] == "error"
            } else {
                out.code == Some(2)
                    && out.stderr.contains(&format!("`{refused}` (line 1, column"))
                    && out.stderr.contains("is not in the profile's function allowlist")
                    && out.stdout.is_empty()
            };
            if !fine {
                problems.push(format!("{what}: {code}\n{out}"));
            }
        }
        assert!(problems.is_empty(), "{} of {} escapes not held:\n{}", problems.len(), ESCAPES.len(), problems.join("\n"));
        assert!(ESCAPES.len() >= 30);
    }
);

both!(
    fn legitimate_programs_work(who) {
        let _g = shared();
        let profile = profile(who);
        let mut problems = Vec::new();
        for (what, code, value) in LEGIT {
            let out = rsandbox(who, &["eval", "--profile", &profile, "--json", code]);
            let j: Value = if out.code == Some(0) { out.json() } else { Value::Null };
            let want: Value = serde_json::from_str(value).unwrap();
            if j["outcome"] != "ok" || j["value"] != want {
                problems.push(format!("{what}: {code}\n{out}"));
            }
        }
        assert!(problems.is_empty(), "{} of {} programs failed:\n{}", problems.len(), LEGIT.len(), problems.join("\n"));
        assert!(LEGIT.len() >= 10);
    }
);

#[test]
fn bad_function_lists_are_refused_by_name() {
    let _g = shared();
    let dir = std::env::temp_dir().join(format!("rsandbox-functions-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, problem) in [
        // A plausible name that is no set and exists nowhere: refused when R is asked.
        ("functions = [\"arithmetics\"]\n", "does not exist in this R: arithmetics"),
        ("functions = [\"rm -rf\"]\n", "\"rm -rf\" is neither"),
        ("functions = \"mean\"\n", "invalid type"),
        ("functions = [\"mean\", \"notafunctionanywhere\"]\n", "notafunctionanywhere"),
    ] {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let out = rsandbox(Who::Root, &["eval", "--profile", path.to_str().unwrap(), "1"]);
        out.assert_code(2);
        assert!(out.stderr.contains(problem), "{text}: stderr does not say {problem:?}:{out}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
