//! Profiles: a policy as data (TOML), selected with `--profile NAME|FILE` on every front.
//!
//! ```toml
//! extends = "strict"              # the built-in profile this one adds to (strict,
//!                                 # base or compile)
//! read = ["/srv/data"]            # extra read-only trees
//! write = ["/srv/data/out"]       # directories writable besides the workspace
//! exec = ["/usr/bin/gfortran"]    # programs that may run (Landlock's execute right)
//! libraries = ["/srv/R/library"]  # extra R libraries, searched first (readable)
//! packages = ["stats", "Matrix"]  # the packages that exist in the sandbox (with their
//!                                 # dependencies); absent: every installed package
//! functions = ["arithmetic", "paste"]  # the function allowlist: names and named sets
//!                                 # (arithmetic, data-frames, plotting); absent: off
//! preload = ["Matrix"]            # loaded once in the zygote
//! [limits]
//! timeout = 10                    # seconds
//! memory = "512M"
//! cpu = 5
//! nproc = 16
//! disk = "64M"
//! [network]                       # egress by allowlist (crate::network): absent, no network
//! allow = ["cloud.r-project.org"] # host patterns, port 443 unless given
//! max_download = "64M"
//! ```
//!
//! Unknown keys are errors that name the key and its line. The package allowlist is
//! enforced by the kernel: the private root shows only the allowed packages' directories
//! in each R library, so `library(other)` finds no package and native code finds no file.
//! It needs the private root (namespaces and a disk quota); without it the profile is
//! refused.
//!
//! The function allowlist is not a kernel wall but a convenience on top of them: the
//! code runs in an environment where only the listed functions (and R's syntax, see
//! [`SYNTAX`]) exist, after a pass over the parsed code refuses the first call of
//! anything else (bad input: nothing runs).
//!
//! Programs: `exec` lists files (or trees) that may be executed; with any listed,
//! seccomp lets `execve` through and Landlock's execute right decides which files, so
//! every other program still fails (`EACCES`). The programs run inside every other
//! layer. The built-in `compile` profile lists the toolchain `R CMD SHLIB`,
//! `Rcpp::sourceCpp` and `R CMD INSTALL` of a source package need ([`COMPILE_PROGRAMS`]).
//!
//! Writing outside the workspace: `write` lists existing directories the sandbox may
//! write below (Landlock's write rights there, a read-write bind in the private root);
//! everything outside them and the workspace stays read-only or absent. They are host
//! directories: no disk quota covers them, and what one sandbox writes there the next
//! one (and the host) reads.

use crate::errors::InputError;
use crate::options::{parse_size, EvalOptions};
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The packages R itself needs: always present.
pub(crate) const BASE_PACKAGES: [&str; 14] = [
    "base",
    "compiler",
    "datasets",
    "graphics",
    "grDevices",
    "grid",
    "methods",
    "parallel",
    "splines",
    "stats",
    "stats4",
    "tcltk",
    "tools",
    "utils",
];

/// What every function allowlist has: R's syntax (assignment, blocks, control flow,
/// indexing, function definition) and the few calls no program does without.
pub const SYNTAX: &[&str] = &[
    "{",
    "(",
    "<-",
    "=",
    "if",
    "for",
    "while",
    "repeat",
    "break",
    "next",
    "function",
    "return",
    "[",
    "[[",
    "$",
    "[<-",
    "[[<-",
    "$<-",
    "c",
    "list",
    ":",
    "invisible",
    "print",
    "cat",
    "length",
    "stop",
    "warning",
    "message",
    "is.null",
    "seq_along",
    "identical",
];

/// The named sets a profile's `functions` may use.
pub const FUNCTION_SETS: &[(&str, &[&str])] = &[
    (
        "arithmetic",
        &[
            "+",
            "-",
            "*",
            "/",
            "^",
            "%%",
            "%/%",
            "==",
            "!=",
            "<",
            ">",
            "<=",
            ">=",
            "&",
            "|",
            "!",
            "&&",
            "||",
            "abs",
            "sqrt",
            "exp",
            "log",
            "log10",
            "log2",
            "round",
            "signif",
            "floor",
            "ceiling",
            "trunc",
            "sum",
            "prod",
            "min",
            "max",
            "mean",
            "median",
            "var",
            "sd",
            "range",
            "cumsum",
            "cumprod",
            "seq",
            "seq_len",
            "rep",
            "rev",
            "is.na",
            "ifelse",
            "numeric",
            "integer",
            "as.numeric",
            "as.integer",
            "pi",
        ],
    ),
    (
        "data-frames",
        &[
            "data.frame",
            "nrow",
            "ncol",
            "dim",
            "names",
            "names<-",
            "colnames",
            "colnames<-",
            "rownames",
            "head",
            "tail",
            "subset",
            "merge",
            "aggregate",
            "order",
            "sort",
            "unique",
            "table",
            "summary",
            "with",
            "transform",
            "rbind",
            "cbind",
            "lapply",
            "sapply",
            "vapply",
            "apply",
            "tapply",
            "split",
            "paste",
            "paste0",
            "sprintf",
            "format",
            "nchar",
            "substr",
            "toupper",
            "tolower",
            "as.character",
            "factor",
            "levels",
            "character",
            "logical",
            "is.numeric",
            "is.character",
            "which",
            "any",
            "all",
            "%in%",
            "match",
            "Reduce",
            "Filter",
            "Map",
            "setdiff",
            "union",
            "intersect",
            "read.csv",
            "write.csv",
            "~",
        ],
    ),
    (
        "plotting",
        &["plot", "hist", "barplot", "boxplot", "lines", "points", "abline", "legend", "title", "par", "text", "axis"],
    ),
    (
        "models",
        &[
            "~",
            "lm",
            "glm",
            "aov",
            "anova",
            "coef",
            "residuals",
            "fitted",
            "predict",
            "confint",
            "summary",
            "formula",
            "binomial",
            "poisson",
            "gaussian",
            "t.test",
            "wilcox.test",
            "chisq.test",
            "cor",
            "cor.test",
            "quantile",
            "scale",
            "xtabs",
            "nrow",
        ],
    ),
];

/// The programs of the built-in `compile` profile, looked up in `/usr/bin` and `/bin`
/// (those missing on the host are left out): shells, make, the compilers and binutils,
/// and the utilities R's build scripts and Makefiles call.
pub const COMPILE_PROGRAMS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "R",
    "Rscript",
    "make",
    "gcc",
    "g++",
    "cc",
    "c++",
    "cpp",
    "gfortran",
    "as",
    "ld",
    "ld.bfd",
    "ar",
    "ranlib",
    "strip",
    "nm",
    "objdump",
    "pkg-config",
    "sed",
    "grep",
    "uname",
    "rm",
    "which",
    "cat",
    "mkdir",
    "cp",
    "mv",
    "ls",
    "echo",
    "expr",
    "basename",
    "dirname",
    "tr",
    "sort",
    "head",
    "tail",
    "ln",
    "chmod",
    "touch",
    "date",
    "tar",
    "gzip",
    "find",
    "awk",
    "mawk",
    "env",
    "test",
    "true",
    "false",
    "printf",
    "wc",
    "cut",
    "mktemp",
    "rmdir",
    "readlink",
    "realpath",
    "install",
    "tee",
    "xargs",
    "diff",
    "cmp",
];

/// Trees whose every file the `compile` profile may execute: the compilers' own
/// programs (`cc1`, `collect2`, `lto-wrapper`).
pub const COMPILE_PROGRAM_TREES: &[&str] = &["/usr/lib/gcc", "/usr/libexec/gcc"];

/// What `compile` reads beyond `base`: the alternatives links (`cc` → `gcc`).
pub const COMPILE_READ: &[&str] = &["/etc/alternatives"];

/// A profile, resolved (its `extends` applied).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Profile {
    /// Its name (a built-in's, or the file's path).
    pub name: String,
    /// Extra read-only trees.
    pub read: Vec<PathBuf>,
    /// Directories writable besides the workspace (host directories: no quota).
    pub write: Vec<PathBuf>,
    /// Files and trees that may be executed (empty: no program runs; `execve` is a
    /// violation). With any listed, R's own `bin` tree (`R CMD`, `Rscript`: R itself)
    /// may run too, and the ELF interpreter of each listed program.
    pub exec: Vec<PathBuf>,
    /// Extra R libraries, searched before the site and system ones (and readable).
    pub libraries: Vec<PathBuf>,
    /// The packages asked for (`None`: all installed); dependencies are added when the
    /// policy is made, from the installed DESCRIPTION files.
    pub packages: Option<Vec<String>>,
    /// Packages loaded in the zygote.
    pub preload: Vec<String>,
    /// Limits the profile sets (others keep their defaults).
    pub limits: ProfileLimits,
    /// The function allowlist, sets expanded and [`SYNTAX`] added (`None`: off).
    pub functions: Option<Vec<String>>,
    /// The `[network]` table: the hosts the sandbox may reach through the supervisor's
    /// proxy (`None`: no network), checked when loaded.
    pub network: Option<crate::network::Network>,
}

/// The `[limits]` table: the same type, knobs and names as every front's `limits`.
pub type ProfileLimits = crate::limits::Limits;

/// A profile file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    extends: Option<String>,
    #[serde(default)]
    read: Vec<PathBuf>,
    #[serde(default)]
    libraries: Vec<PathBuf>,
    #[serde(default)]
    write: Vec<PathBuf>,
    #[serde(default)]
    exec: Vec<PathBuf>,
    packages: Option<Vec<String>>,
    functions: Option<Vec<String>>,
    #[serde(default)]
    preload: Vec<String>,
    #[serde(default)]
    limits: ProfileLimits,
    network: Option<crate::network::Network>,
}

impl Profile {
    /// The built-in `strict` profile: R, its libraries and the system libraries readable,
    /// only the workspace writable, no programs, no network (the default).
    pub fn strict() -> Profile {
        Profile { name: "strict".into(), ..Profile::default() }
    }

    /// The built-in `base` profile (RAppArmor's r-base): `strict`, plus the caller's own
    /// R libraries (`R_LIBS_USER`, else every `~/R/*-library/*` directory), readable and
    /// searched first, so packages installed with `install.packages()` are there.
    pub fn base() -> Profile {
        Profile { name: "base".into(), libraries: user_libraries(), ..Profile::default() }
    }

    /// The built-in `compile` profile (RAppArmor's r-compile): `base`, plus the
    /// toolchain ([`COMPILE_PROGRAMS`], [`COMPILE_PROGRAM_TREES`], R's `bin`) may run, so
    /// `R CMD SHLIB`, `Rcpp::sourceCpp` and `R CMD INSTALL` of a local source package
    /// work; any other program still fails.
    pub fn compile() -> Profile {
        let mut exec: Vec<PathBuf> = Vec::new();
        for name in COMPILE_PROGRAMS {
            let found = ["/usr/bin", "/bin"].iter().map(|dir| Path::new(dir).join(name)).find(|p| p.is_file());
            if let Some(real) = found.and_then(|p| p.canonicalize().ok()) {
                if !exec.contains(&real) {
                    exec.push(real);
                }
            }
        }
        exec.extend(COMPILE_PROGRAM_TREES.iter().map(PathBuf::from).filter(|p| p.is_dir()));
        let read = COMPILE_READ.iter().map(PathBuf::from).filter(|p| p.exists()).collect();
        Profile { name: "compile".into(), exec, read, ..Profile::base() }
    }

    /// A built-in profile by name, or a profile file.
    pub fn load(name_or_path: &str) -> Result<Profile, InputError> {
        match name_or_path {
            "strict" => return Ok(Profile::strict()),
            "base" => return Ok(Profile::base()),
            "compile" => return Ok(Profile::compile()),
            "user" => {
                return Err(bad(
                    name_or_path,
                    "\"user\" is a profile file of your own: give its path (it may extend strict, base or compile)"
                        .into(),
                ))
            }
            _ => {}
        }
        let path = Path::new(name_or_path);
        let text = std::fs::read_to_string(path).map_err(|e| bad(name_or_path, format!("cannot read it: {e}")))?;
        Profile::parse(name_or_path, &text)
    }

    /// Parse a profile file's text (`origin` names it in errors).
    pub fn parse(origin: &str, text: &str) -> Result<Profile, InputError> {
        // toml's messages name the line and column, and the unknown key.
        let file: ProfileFile =
            toml::from_str(text).map_err(|e| bad(origin, e.to_string().trim().replace('\n', " ")))?;
        let mut profile = match file.extends.as_deref() {
            None | Some("strict") => Profile::strict(),
            Some("base") => Profile::base(),
            Some("compile") => Profile::compile(),
            Some(other) => {
                return Err(bad(
                    origin,
                    format!("extends = {other:?}: a profile extends \"strict\", \"base\" or \"compile\""),
                ))
            }
        };
        for (key, paths) in
            [("read", &file.read), ("libraries", &file.libraries), ("exec", &file.exec), ("write", &file.write)]
        {
            for path in paths {
                if !path.is_absolute() || path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                    return Err(bad(origin, format!("{key}: {} must be absolute, without ..", path.display())));
                }
            }
        }
        if let Some(missing) = file.libraries.iter().find(|p| !p.is_dir()) {
            return Err(bad(origin, format!("libraries: {} is not a directory", missing.display())));
        }
        if let Some(not_dir) = file.write.iter().find(|p| !p.is_dir()) {
            return Err(bad(origin, format!("write: {} is not a directory", not_dir.display())));
        }
        if let Some(e) = file.write.iter().find_map(|p| writable_dir(p).err()) {
            return Err(bad(origin, e));
        }
        if let Some(missing) = file.exec.iter().find(|p| !p.exists()) {
            return Err(bad(origin, format!("exec: {} does not exist", missing.display())));
        }
        if let Some(bad_name) = file.packages.iter().flatten().chain(&file.preload).find(|p| !crate::is_package_name(p))
        {
            return Err(bad(origin, format!("{bad_name:?} is not a package name")));
        }
        let l = &file.limits;
        for (key, value) in
            [("memory", &l.memory), ("disk", &l.disk), ("fsize", &l.fsize), ("max_output", &l.max_output)]
        {
            if let Some(v) = value {
                parse_size(v)
                    .map_err(|_| bad(origin, format!("limits.{key} = {v:?} is not a size such as \"512M\"")))?;
            }
        }
        if l.network.is_some() {
            return Err(bad(
                origin,
                "the network allowlist goes in the profile's [network] table, not in [limits]".into(),
            ));
        }
        if [l.timeout, l.cpu, l.nproc, l.nofile].contains(&Some(0)) {
            return Err(bad(origin, "limits must be greater than zero".into()));
        }
        l.check().map_err(|e| bad(origin, format!("limits: {e}")))?;
        profile.functions = file.functions.map(|names| expand_functions(origin, &names)).transpose()?;
        profile.name = origin.to_string();
        profile.read.extend(file.read);
        profile.exec.extend(file.exec);
        profile.write.extend(file.write);
        profile.libraries.extend(file.libraries);
        profile.packages = file.packages;
        profile.preload.extend(file.preload);
        profile.limits = file.limits;
        if let Some(network) = &file.network {
            network.policy().map_err(|e| bad(origin, e.to_string()))?;
        }
        // Kept with hosts and nothing allowed: `learn` starts from the operator's addresses.
        profile.network = file.network.filter(|n| n.is_on() || !n.hosts.is_empty());
        Ok(profile)
    }

    /// `options` with the profile's limits in place of the defaults. They were checked
    /// when the profile was loaded; a profile built in code with a size that does not
    /// parse keeps `options` as they are.
    pub fn apply_limits(&self, options: EvalOptions) -> EvalOptions {
        self.limits.apply(options.clone()).unwrap_or(options)
    }

    /// The packages that exist in the sandbox: the asked ones, their dependencies
    /// (Depends, Imports, LinkingTo of the installed DESCRIPTION files, transitively),
    /// the preloaded ones and R's base packages. `None` when the profile allows all.
    /// An asked package that is not installed is an error.
    pub fn allowed_packages(&self, libraries: &[PathBuf]) -> Result<Option<BTreeSet<String>>, InputError> {
        let Some(asked) = &self.packages else { return Ok(None) };
        let installed = installed_packages(libraries);
        let mut allowed: BTreeSet<String> = BASE_PACKAGES.iter().map(|s| s.to_string()).collect();
        let mut queue: Vec<String> = asked.iter().chain(&self.preload).cloned().collect();
        while let Some(name) = queue.pop() {
            if !allowed.insert(name.clone()) && !asked.contains(&name) {
                continue;
            }
            let Some(description) = installed.get(&name) else {
                if asked.contains(&name) || self.preload.contains(&name) {
                    return Err(bad(
                        &self.name,
                        format!("package {name:?} is not installed in {}", join_paths(libraries)),
                    ));
                }
                continue; // a dependency R itself will report, if ever loaded
            };
            for dependency in dependencies(description) {
                if !allowed.contains(&dependency) {
                    queue.push(dependency);
                }
            }
        }
        Ok(Some(allowed))
    }
}

/// Whether `dir` may be a `write` directory. One in or over the system or R would let
/// code change what every later sandbox runs; one over the temporary directory would
/// reach where the sandboxes' workspaces live: refused.
pub fn writable_dir(dir: &Path) -> Result<(), String> {
    let system: Vec<PathBuf> = crate::system_trees::SYSTEM_READ_ONLY
        .iter()
        .chain(&["/etc", "/proc", "/sys", "/dev"])
        .map(PathBuf::from)
        .collect();
    if system.iter().any(|s| s.starts_with(dir) || dir.starts_with(s)) || std::env::temp_dir().starts_with(dir) {
        return Err(format!(
            "write: {} is, holds or lies in a system or temporary root; list a directory of your own",
            dir.display()
        ));
    }
    Ok(())
}

/// A `functions` list with its sets expanded and R's syntax added, sorted and unique.
/// A name is a set's, an R name (`mean`, `names<-`, `.Machine`) or an operator (`+`,
/// `%in%`); anything else is refused, naming it.
fn expand_functions(origin: &str, names: &[String]) -> Result<Vec<String>, InputError> {
    let mut all: BTreeSet<String> = SYNTAX.iter().map(|s| s.to_string()).collect();
    for name in names {
        if let Some((_, members)) = FUNCTION_SETS.iter().find(|(set, _)| set == name) {
            all.extend(members.iter().map(|s| s.to_string()));
        } else if is_function_name(name) {
            all.insert(name.clone());
        } else {
            let sets: Vec<&str> = FUNCTION_SETS.iter().map(|(s, _)| *s).collect();
            return Err(bad(
                origin,
                format!("functions: {name:?} is neither a function name nor a set ({})", sets.join(", ")),
            ));
        }
    }
    Ok(all.into_iter().collect())
}

/// An R function name as the allowlist takes it: a syntactic name (optionally a
/// replacement function, `names<-`), or an operator.
fn is_function_name(name: &str) -> bool {
    let base = name.strip_suffix("<-").filter(|b| !b.is_empty()).unwrap_or(name);
    let syntactic = base.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '.')
        && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    let special = base.len() > 2
        && base.starts_with('%')
        && base.ends_with('%')
        && !base[1..base.len() - 1].contains(['%', '\n']);
    let operator = [
        "+", "-", "*", "/", "^", "==", "!=", "<", ">", "<=", ">=", "&", "|", "!", "&&", "||", "~", "::", ":::", "@",
        "?",
    ]
    .contains(&base);
    syntactic || special || operator
}

/// The caller's own R libraries: `R_LIBS_USER` (its existing entries), else the
/// directories `~/R/<platform>-library/<version>` that exist.
pub(crate) fn user_libraries() -> Vec<PathBuf> {
    if let Some(listed) = std::env::var_os("R_LIBS_USER").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&listed).filter(|p| p.is_absolute() && p.is_dir()).collect();
    }
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else { return Vec::new() };
    let mut found = Vec::new();
    for platform in std::fs::read_dir(home.join("R")).into_iter().flatten().flatten() {
        if platform.file_name().to_string_lossy().ends_with("-library") {
            let mut versions: Vec<PathBuf> = std::fs::read_dir(platform.path())
                .into_iter()
                .flatten()
                .flatten()
                .map(|v| v.path())
                .filter(|p| p.is_dir())
                .collect();
            versions.sort();
            found.extend(versions);
        }
    }
    found
}

fn bad(origin: &str, message: String) -> InputError {
    InputError::Profile { origin: origin.to_string(), message }
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Package name → its DESCRIPTION text, first library wins (as R's search order).
fn installed_packages(libraries: &[PathBuf]) -> HashMap<String, String> {
    let mut found = HashMap::new();
    for library in libraries {
        let Ok(entries) = std::fs::read_dir(library) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if found.contains_key(&name) {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(entry.path().join("DESCRIPTION")) {
                found.insert(name, text);
            }
        }
    }
    found
}

/// The package names in a DESCRIPTION's Depends, Imports and LinkingTo fields (version
/// requirements and `R` itself dropped; continuation lines joined).
fn dependencies(description: &str) -> Vec<String> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in description.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = fields.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
        } else if let Some((key, value)) = line.split_once(':') {
            fields.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    fields
        .iter()
        .filter(|(key, _)| ["Depends", "Imports", "LinkingTo"].contains(&key.as_str()))
        .flat_map(|(_, value)| value.split(','))
        .map(|item| item.split('(').next().unwrap_or("").trim().to_string())
        .filter(|name| !name.is_empty() && name != "R" && crate::is_package_name(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn unknown_keys_and_bad_values_are_named_with_their_line() {
        let error = Profile::parse("p.toml", "read = []\nnetwork = true\n").unwrap_err().to_string();
        assert!(error.contains("network") && error.contains("line 2"), "{error}");
        let error = Profile::parse("p.toml", "[limits]\nmemory = 5\n").unwrap_err().to_string();
        assert!(error.contains("memory") && error.contains("line 2"), "{error}");
        let error = Profile::parse("p.toml", "[limits]\nmemory = \"lots\"\n").unwrap_err().to_string();
        assert!(error.contains("limits.memory"), "{error}");
        let error = Profile::parse("p.toml", "read = [\"../etc\"]\n").unwrap_err().to_string();
        assert!(error.contains("absolute"), "{error}");
        let error = Profile::parse("p.toml", "write = [\"/no/such/dir\"]\n").unwrap_err().to_string();
        assert!(error.contains("/no/such/dir is not a directory"), "{error}");
        for system in ["/usr/lib", "/", "/etc", "/tmp"] {
            let error = Profile::parse("p.toml", &format!("write = [\"{system}\"]\n")).unwrap_err().to_string();
            assert!(error.contains("system or temporary root"), "{system}: {error}");
        }
        let error = Profile::parse("p.toml", "write = [\"/tmp/../usr\"]\n").unwrap_err().to_string();
        assert!(error.contains("absolute, without .."), "{error}");
        let error = Profile::parse("p.toml", "exec = [\"/usr/bin/../bin/x\"]\n").unwrap_err().to_string();
        assert!(error.contains("exec") && error.contains("absolute"), "{error}");
        let error = Profile::parse("p.toml", "exec = [\"/no/such/program\"]\n").unwrap_err().to_string();
        assert!(error.contains("/no/such/program does not exist"), "{error}");
        let error = Profile::parse("p.toml", "extends = \"lenient\"\n").unwrap_err().to_string();
        assert!(error.contains("strict") && error.contains("compile"), "{error}");
        let error = Profile::parse("p.toml", "functions = [\"sum\", \"x y\"]\n").unwrap_err().to_string();
        assert!(error.contains("\"x y\" is neither a function name nor a set"), "{error}");
        let error = Profile::parse("p.toml", "packages = [\"../x\"]\n").unwrap_err().to_string();
        assert!(error.contains("not a package name"), "{error}");
    }

    #[test]
    fn compile_lists_the_toolchain_and_a_file_can_extend_it() {
        let compile = Profile::compile();
        let sh = Path::new("/bin/sh").canonicalize().unwrap();
        assert!(compile.exec.contains(&sh), "{:?}", compile.exec);
        assert!(compile.exec.iter().all(|p| p.is_absolute() && p.exists()), "{:?}", compile.exec);
        let p = Profile::parse("p.toml", "extends = \"compile\"\nexec = [\"/usr/bin/env\"]\n").unwrap();
        assert!(p.exec.contains(&PathBuf::from("/usr/bin/env")) && p.exec.contains(&sh));
        assert!(Profile::strict().exec.is_empty() && Profile::base().exec.is_empty());
    }

    #[test]
    fn function_sets_expand_and_syntax_is_always_there() {
        let p = Profile::parse("p.toml", "functions = [\"arithmetic\", \"paste\", \"names<-\", \"%in%\"]\n").unwrap();
        let f = p.functions.unwrap();
        for name in ["mean", "+", "paste", "names<-", "%in%", "<-", "function", "["] {
            assert!(f.contains(&name.to_string()), "{name} missing from {f:?}");
        }
        assert!(!f.contains(&"system".to_string()) && !f.contains(&"::".to_string()));
        assert_eq!(Profile::parse("p.toml", "read = []\n").unwrap().functions, None);
    }

    #[test]
    fn a_profile_sets_limits_and_packages() {
        let p = Profile::parse(
            "p.toml",
            "extends = \"strict\"\npackages = [\"stats\"]\n[limits]\ntimeout = 5\nmemory = \"256M\"\n",
        )
        .unwrap();
        let o = p.apply_limits(EvalOptions::default());
        assert_eq!((o.timeout, o.memory), (Duration::from_secs(5), Some(256 << 20)));
        assert_eq!(o.disk, EvalOptions::default().disk, "what the profile does not set keeps its default");
        assert_eq!(p.packages, Some(vec!["stats".to_string()]));
    }

    #[test]
    fn a_network_table_is_checked_and_reaches_the_options() {
        let text = "[network]\nallow = [\"cran.test\"]\nhosts = { \"cran.test\" = \"198.51.100.2\" }\nmax_download = \"64M\"\n";
        let p = Profile::parse("p.toml", text).unwrap();
        let network = p.network.clone().unwrap();
        assert_eq!(network.allow, vec!["cran.test"]);
        assert_eq!(network.policy().unwrap().max_bytes_in, 64 << 20);
        let error = Profile::parse("p.toml", "[limits.network]\nallow = [\"a.test\"]\n").unwrap_err().to_string();
        assert!(error.contains("[network] table"), "{error}");
        let error = Profile::parse("p.toml", "[network]\nallow = [\"10.0.0.1\"]\n").unwrap_err().to_string();
        assert!(error.contains("p.toml") && error.contains("10.0.0.1"), "{error}");
        let error = Profile::parse("p.toml", "[network]\nallwo = []\n").unwrap_err().to_string();
        assert!(error.contains("allwo") && error.contains("line 2"), "{error}");
        let error = Profile::parse("p.toml", "[network]\nallow = [\"a.test\"]\nmax_download = \"x\"\n").unwrap_err();
        assert!(error.to_string().contains("network.max_download"), "{error}");
        assert_eq!(Profile::parse("p.toml", "[network]\nallow = []\n").unwrap().network, None, "empty: off");
    }

    #[test]
    fn dependencies_come_from_description_fields() {
        let d = "Package: x\nDepends: R (>= 3.5), methods,\n  lattice (>= 0.20)\nImports: grid, graphics\nSuggests: MASS\nLinkingTo: Rcpp\n";
        assert_eq!(dependencies(d), ["methods", "lattice", "grid", "graphics", "Rcpp"]);
    }
}
