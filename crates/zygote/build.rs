//! Link the system R: `R_HOME` if set, otherwise `R RHOME`.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=R_HOME");
    println!("cargo:rerun-if-changed=src/eval.R");
    let r_home = std::env::var("R_HOME").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| {
        let out = Command::new("R")
            .args(["RHOME"])
            .output()
            .expect("failed to run `R RHOME`: install R (apt-get install r-base-core r-base-dev) or set R_HOME");
        assert!(out.status.success(), "`R RHOME` failed");
        String::from_utf8(out.stdout).expect("R RHOME printed non-UTF-8").trim().to_string()
    });
    let lib = format!("{r_home}/lib");
    assert!(
        std::path::Path::new(&format!("{lib}/libR.so")).exists(),
        "{lib}/libR.so not found: R must be built as a shared library (Debian's r-base-core is)"
    );
    println!("cargo:rustc-link-search=native={lib}");
    println!("cargo:rustc-link-lib=dylib=R");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    println!("cargo:rustc-env=RSANDBOX_R_HOME={r_home}");
}
