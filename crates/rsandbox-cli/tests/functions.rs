//! The function allowlist (a profile's `functions`): legitimate programs written with the
//! allowed sets work, as root and as an ordinary user, and bad lists are refused by name.
//!
//! The escape attempts are corpus cases (`tests/attacks/allowlist/`, run in every row of
//! the attack corpus): each is refused before it runs (exit 2, naming the first function
//! not allowed) or fails where it runs (nothing but the allowed functions exists there).
//! The sandbox's kernel walls would hold anyway: this layer is a convenience on top of
//! them, and those cases check that it keeps its own promise.

#[macro_use]
mod common;

use common::*;
use serde_json::Value;

/// The profile every case runs under, written where `who` can read it.
fn profile(who: Who) -> String {
    let dir = std::env::temp_dir().join(format!("rsandbox-functions-{}-{who:?}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("calc.toml");
    std::fs::write(&path, "functions = [\"arithmetic\", \"data-frames\", \"plotting\", \"models\"]\n").unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&dir, mode).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    path.to_string_lossy().into_owned()
}

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
    // Formula methods build `stats::model.frame(...)` and evaluate it in the user's
    // environment: the allowlist's guarded `::` reaches model.frame.
    ("aggregate with a formula", "df <- data.frame(g = c('x', 'y', 'x'), v = 1:3); aggregate(v ~ g, data = df, FUN = mean)$v", "[2,2]"),
    ("a boxplot of a formula", "df <- data.frame(y = c(1, 5, 2, 6), g = c('a', 'b', 'a', 'b')); boxplot(y ~ g, data = df); 'drawn'", "\"drawn\""),
    ("a linear model", "df <- data.frame(x = 1:6, y = c(2.1, 3.9, 6.2, 7.8, 10.1, 12.2)); fit <- lm(y ~ x, data = df); round(coef(fit)[['x']], 2)", "2.02"),
    ("a t test of a formula", "df <- data.frame(y = c(2.1, 3.9, 6.2, 7.8, 10.1, 12.2), g = rep(c('a', 'b'), 3)); round(t.test(y ~ g, data = df)$p.value, 4)", "0.6112"),
    ("write.csv to the workspace", "write.csv(data.frame(a = 1:2), 'a.csv', row.names = FALSE); nrow(read.csv('a.csv'))", "2"),
    ("a logistic model", "df <- data.frame(x = 1:6, k = c(0, 0, 1, 0, 1, 1)); fit <- glm(k ~ x, data = df, family = binomial); round(coef(fit)[[2]], 1)", "1.2"),
];

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
