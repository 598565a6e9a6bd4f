//! Advisory lint: calls in R code that deserve a reviewer's attention, found with the
//! tree-sitter R grammar, so text inside strings and comments never matches. Advisory
//! only: the kernel layers are the boundary, and a determined author can always hide a
//! call from any static check (`get(paste0("sys", "tem"))` is reported as a dynamic
//! lookup, not as `system`).

use serde::Serialize;
use tree_sitter::{Node, Parser};

/// Why a call was reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Concern {
    /// Runs programs, loads native code or touches the system (`system`, `dyn.load`, ...).
    SystemCall,
    /// Looks a function up by name at run time (`get`, `match.fun`, `do.call`, `eval`, ...).
    DynamicLookup,
    /// `.Internal`/`.Primitive`/`.Call`: R's internals and native entry points.
    Internal,
    /// `pkg:::name`: an unexported function.
    TripleColon,
}

/// One finding, 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Finding {
    /// Line (1-based).
    pub line: usize,
    /// Column (1-based, in bytes).
    pub column: usize,
    /// The category.
    pub concern: Concern,
    /// The function (or `pkg:::name`) called.
    pub call: String,
}

const SYSTEM_CALLS: &[&str] = &[
    "system",
    "system2",
    "shell",
    "shell.exec",
    "pipe",
    "dyn.load",
    "dyn.unload",
    "library.dynam",
    "Sys.setenv",
    "Sys.unsetenv",
    "Sys.chmod",
    "Sys.setFileTime",
    "socketConnection",
    "socketAccept",
    "make.socket",
    "url",
    "download.file",
    "file.symlink",
    "file.link",
    "unlink",
    "file.remove",
    "processx::run",
    "mcparallel",
    "mcfork",
];
const DYNAMIC_LOOKUPS: &[&str] = &[
    "get",
    "get0",
    "mget",
    "match.fun",
    "do.call",
    "eval",
    "evalq",
    "eval.parent",
    "parse",
    "str2lang",
    "str2expression",
    "getFromNamespace",
    "getNativeSymbolInfo",
    "assignInNamespace",
    "body<-",
    "environment<-",
    "sys.function",
    "Recall",
];
const INTERNALS: &[&str] = &[".Internal", ".Primitive", ".Call", ".External", ".External2", ".C", ".Fortran"];

/// Lint `code`. Returns findings in source order; code that does not parse yields the
/// findings of the parts that did.
pub fn lint(code: &str) -> Vec<Finding> {
    let mut parser = Parser::new();
    if parser.set_language(&tree_sitter_r::LANGUAGE.into()).is_err() {
        return Vec::new();
    }
    let Some(tree) = parser.parse(code, None) else { return Vec::new() };
    let mut findings = Vec::new();
    visit(tree.root_node(), code.as_bytes(), &mut findings);
    findings.sort_by_key(|f| (f.line, f.column));
    findings
}

fn visit(node: Node<'_>, src: &[u8], out: &mut Vec<Finding>) {
    match node.kind() {
        "call" => {
            if let Some(function) = node.child_by_field_name("function") {
                let name = function.utf8_text(src).unwrap_or_default();
                let bare = name.rsplit("::").next().unwrap_or(name).trim_matches('`');
                let concern = if function.kind() == "namespace_operator" && name.contains(":::") {
                    None // reported by the namespace_operator arm
                } else if SYSTEM_CALLS.contains(&bare) {
                    Some(Concern::SystemCall)
                } else if DYNAMIC_LOOKUPS.contains(&bare) {
                    Some(Concern::DynamicLookup)
                } else if INTERNALS.contains(&bare) {
                    Some(Concern::Internal)
                } else {
                    None
                };
                if let Some(concern) = concern {
                    out.push(finding(function, concern, name));
                }
            }
        }
        "namespace_operator" => {
            let text = node.utf8_text(src).unwrap_or_default();
            if node.child_by_field_name("operator").and_then(|o| o.utf8_text(src).ok()) == Some(":::") {
                out.push(finding(node, Concern::TripleColon, text));
            }
        }
        _ => {}
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        visit(child, src, out);
    }
}

fn finding(node: Node<'_>, concern: Concern, call: &str) -> Finding {
    let p = node.start_position();
    Finding { line: p.row + 1, column: p.column + 1, concern, call: call.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(code: &str) -> Vec<(usize, usize, Concern, String)> {
        lint(code).into_iter().map(|f| (f.line, f.column, f.concern, f.call)).collect()
    }

    #[test]
    fn reports_system_dynamic_internal_and_triple_colon_with_positions() {
        let code = "x <- 1\nsystem('ls')\n  f <- get(paste0('sys', 'tem'))\n.Internal(foo())\nutils:::head(1)\nbase::system2('id')\n";
        assert_eq!(
            kinds(code),
            vec![
                (2, 1, Concern::SystemCall, "system".into()),
                (3, 8, Concern::DynamicLookup, "get".into()),
                (4, 1, Concern::Internal, ".Internal".into()),
                (5, 1, Concern::TripleColon, "utils:::head".into()),
                (6, 1, Concern::SystemCall, "base::system2".into()),
            ]
        );
    }

    #[test]
    fn strings_comments_and_plain_names_are_not_hits() {
        let code = "# system('rm -rf /')\nx <- \"system('ls')\"\nsystem <- 3\nprint(system)\nmy_get(1)\nlm(y ~ x)\n";
        assert_eq!(kinds(code), vec![]);
    }

    #[test]
    fn obfuscated_forms_are_caught_as_dynamic_lookups() {
        let hits = kinds("do.call('system', list('id'))\nmatch.fun('system')('id')\neval(parse(text = 'system(1)'))\n");
        let calls: Vec<&str> = hits.iter().map(|h| h.3.as_str()).collect();
        assert_eq!(calls, vec!["do.call", "match.fun", "eval", "parse"]);
    }
}
