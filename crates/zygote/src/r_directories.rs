//! Where the installed R keeps its `share`, `doc` and `include` trees.
//!
//! R finds them through `R_SHARE_DIR`, `R_DOC_DIR` and `R_INCLUDE_DIR`, which the `R`
//! front-end script sets before starting R. Distributions move them out of `R_HOME`
//! (Debian and Ubuntu: `/usr/share/R/share`, `/usr/share/R/doc`, `/usr/share/R/include`;
//! Fedora: `/usr/share/R`, `/usr/share/doc/R`, `/usr/include/R`), so an embedded R that
//! is not told gets `R.home("share")` = `R_HOME/share`, which may not exist: `citation()`
//! and help pages then fail. The installed R's own script is the authority: read the
//! assignments from `R_HOME/bin/R`, as the script itself would make them.

use std::path::{Path, PathBuf};

/// The variables R reads for its own trees.
pub const VARIABLES: [&str; 3] = ["R_SHARE_DIR", "R_DOC_DIR", "R_INCLUDE_DIR"];

/// Each variable with the directory the installed R's script gives it, for the ones
/// that name an existing directory. A build installed without the script (or one that
/// keeps the trees in `R_HOME`) yields `R_HOME/share` and so on, which R uses anyway.
pub fn of_installed_r(r_home: &Path) -> Vec<(&'static str, PathBuf)> {
    let script = std::fs::read_to_string(r_home.join("bin").join("R")).unwrap_or_default();
    VARIABLES
        .iter()
        .filter_map(|&name| {
            let dir = assigned(&script, name, r_home).unwrap_or_else(|| r_home.join(default_subdir(name)));
            dir.is_dir().then_some((name, dir))
        })
        .collect()
}

fn default_subdir(name: &str) -> &'static str {
    match name {
        "R_SHARE_DIR" => "share",
        "R_DOC_DIR" => "doc",
        _ => "include",
    }
}

/// The value of the first plain `NAME=value` line of the script (quotes removed,
/// `${R_HOME}`/`$R_HOME` expanded); `None` for anything that needs a shell to evaluate.
fn assigned(script: &str, name: &str, r_home: &Path) -> Option<PathBuf> {
    let prefix = format!("{name}=");
    let value = script.lines().map(str::trim).find_map(|line| line.strip_prefix(prefix.as_str()))?;
    let value = value.trim_matches(|c| c == '"' || c == '\'');
    let home = r_home.to_string_lossy();
    let value = value.replace("${R_HOME}", &home).replace("$R_HOME", &home);
    (value.starts_with('/') && !value.contains(['$', '`', ' '])).then(|| PathBuf::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_scripts_assignments() {
        let script = "#!/bin/bash\nR_HOME_DIR=/usr/lib/R\nR_SHARE_DIR=/usr/share/R/share\nexport R_SHARE_DIR\n\
                      R_INCLUDE_DIR=\"${R_HOME}/include\"\nR_DOC_DIR=$(pwd)/doc\n";
        let home = Path::new("/opt/R");
        assert_eq!(assigned(script, "R_SHARE_DIR", home), Some(PathBuf::from("/usr/share/R/share")));
        assert_eq!(assigned(script, "R_INCLUDE_DIR", home), Some(PathBuf::from("/opt/R/include")));
        assert_eq!(assigned(script, "R_DOC_DIR", home), None, "needs a shell");
        assert_eq!(assigned(script, "R_MISSING", home), None);
    }
}
