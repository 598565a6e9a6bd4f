//! Which `rsandbox` command the tests run.

use std::path::PathBuf;

/// This build's command, or the one `RSANDBOX_TEST_CLI` names: `scripts/test.sh` sets it
/// to the release command as users get it (built against musl by
/// `scripts/build-release.sh`) for the `exec` tests and the attack corpus. The server and
/// the zygote are always this build's.
pub fn cli_under_test() -> PathBuf {
    match std::env::var_os("RSANDBOX_TEST_CLI").filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_BIN_EXE_rsandbox")),
    }
}
