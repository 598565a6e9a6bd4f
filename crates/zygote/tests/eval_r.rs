//! Runs the R evaluator's own unit tests (`eval_unit.R`) with the system Rscript.

#[test]
fn eval_r_unit_tests_pass() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/eval_unit.R");
    let out = std::process::Command::new("Rscript")
        .args(["--vanilla", script])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("failed to run Rscript: install r-base-core");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "eval_unit.R failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(" passed, 0 failed"), "unexpected summary:\n{stdout}");
}
