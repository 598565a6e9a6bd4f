//! Names that cross from the supervisor into R code: both sides check them, because the
//! zygote and the child paste them into R source.

/// R package names: letters, digits and dots, starting with a letter.
pub fn is_package_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')
}

/// A syntactic R name safe to paste into R code: starts with a letter (or a dot not
/// followed by a digit), then letters, digits, dots and underscores; not a reserved word.
pub fn is_r_identifier(name: &str) -> bool {
    const RESERVED: [&str; 20] = [
        "if",
        "else",
        "repeat",
        "while",
        "function",
        "for",
        "next",
        "break",
        "TRUE",
        "FALSE",
        "NULL",
        "Inf",
        "NaN",
        "NA",
        "NA_integer_",
        "NA_real_",
        "NA_character_",
        "NA_complex_",
        "in",
        "...",
    ];
    let mut chars = name.chars();
    let starts_well = match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => true,
        Some('.') => !name[1..].starts_with(|c: char| c.is_ascii_digit()),
        _ => false,
    };
    starts_well
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        && !RESERVED.contains(&name)
}

/// The components of a path relative to a sandbox's workspace, or why it is refused:
/// absolute paths, NUL, and `.`, `..` or empty components. Both the supervisor (before
/// asking) and the child (before opening) check it; the child also refuses symlinks.
pub fn workspace_path(path: &str) -> Result<Vec<&str>, String> {
    if path.is_empty() || path.starts_with('/') || path.contains('\0') {
        return Err(format!("{path:?} is not a relative path inside the workspace"));
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.iter().any(|c| c.is_empty() || *c == "." || *c == "..") {
        return Err(format!("{path:?} must be plain names separated by single slashes (no '.', '..' or empty parts)"));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names() {
        assert!(is_package_name("data.table"));
        assert!(!is_package_name("1pkg"));
        assert!(!is_package_name("a\"); system('x"));
        assert!(!is_package_name(""));
    }

    #[test]
    fn workspace_paths() {
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/", "a\0b"] {
            assert!(workspace_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(workspace_path("data/in.csv").unwrap(), ["data", "in.csv"]);
    }

    #[test]
    fn r_identifiers() {
        for ok in ["add", "get_data", ".hidden", "x2"] {
            assert!(is_r_identifier(ok), "{ok}");
        }
        for bad in ["", "2x", ".2x", "a b", "a\"", "if", "function", "_x", "a-b"] {
            assert!(!is_r_identifier(bad), "{bad}");
        }
    }
}
