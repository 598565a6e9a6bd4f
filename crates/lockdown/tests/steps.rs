//! The lockdown's steps have one numbering: the order in which `apply` runs them. Each
//! step's module doc, its error type in `errors.rs`, the crate doc's list and DESIGN.md's
//! "The lockdown, in order" must give it the same number (they disagreed: Landlock and
//! the rlimits had swapped numbers). Read from the sources, no kernel needed.

use std::path::Path;

/// Each step in `apply`'s order: its module, the call `apply` makes, its error type, and
/// words DESIGN.md's item for it starts with.
const STEPS: [(&str, &str, &str, &str); 6] = [
    ("process", "process::isolate_process(", "ProcessError", "New process group"),
    ("namespaces", "namespaces::enter_namespaces_from(", "NamespaceError", "Namespaces"),
    ("privileges", "privileges::drop_privileges(", "PrivilegeError", "The nice value"),
    ("ruleset", "ruleset::restrict_filesystem_and_network(", "LandlockError", "Landlock"),
    ("rlimits", "rlimits::apply_limits(", "RlimitError", "rlimits"),
    ("seccomp", "filters.install(", "SeccompError", "seccomp"),
];

fn source(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn apply_runs_the_steps_in_their_numbered_order() {
    let lib = source("src/lib.rs");
    let body = &lib[lib.find("pub fn apply(").expect("apply in lib.rs")..];
    let mut last = 0;
    for (module, call, _, _) in STEPS {
        let at = body.find(call).unwrap_or_else(|| panic!("apply makes no call {call}"));
        assert!(at > last, "apply calls {module} ({call}) out of the numbered order");
        last = at;
    }
}

#[test]
fn every_place_gives_a_step_the_same_number() {
    let lib = source("src/lib.rs");
    let errors = source("src/errors.rs");
    let design = source("../../DESIGN.md");
    let section = &design[design.find("## The lockdown, in order").expect("the lockdown section in DESIGN.md")..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    for (i, (module, _, error, words)) in STEPS.into_iter().enumerate() {
        let n = i + 1;
        assert!(lib.contains(&format!("//! {n}. [`{module}`]")), "the crate doc's step {n} is not {module}");
        let before_enum = &errors[..errors.find(&format!("pub enum {error} ")).expect(error)];
        let heading = before_enum.rfind("/// Step ").map(|at| &before_enum[at..]).unwrap_or_default();
        assert!(heading.starts_with(&format!("/// Step {n}:")), "errors.rs: {error} is not headed step {n}");
        // The seccomp module's doc describes its table; every other step's module names
        // its number.
        if module != "seccomp" {
            let doc = source(&format!("src/{module}.rs"));
            assert!(doc.starts_with(&format!("//! Step {n}:")), "src/{module}.rs does not call itself step {n}");
        }
        assert!(section.contains(&format!("\n{n}. {words}")), "DESIGN.md's step {n} is not {module} ({words}…)");
    }
}
