//! `rsandbox mcp` driven by the official MCP Python SDK (`tests/mcp/client.py`), in the
//! virtual environment `scripts/install-deps.sh` makes (`~/.cache/rsandbox/mcp-venv`,
//! or `RSANDBOX_MCP_PYTHON`). Without it the test says so and does not pass silently:
//! it fails, naming the install step.

use std::path::PathBuf;
use std::process::Command;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("RSANDBOX_MCP_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/rsandbox/mcp-venv/bin/python")
}

#[test]
fn an_mcp_client_runs_r_through_every_tool() {
    let python = python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-deps.sh (it makes the venv with the MCP Python SDK)",
        python.display()
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let out = Command::new(&python).arg(&script).arg(env!("CARGO_BIN_EXE_rsandbox")).output().expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the MCP client failed:\n{stdout}\n{stderr}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok ")).count(), 10, "every check ran:\n{stdout}");
}
