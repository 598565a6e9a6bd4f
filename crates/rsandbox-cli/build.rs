//! Link the `rsandbox` and `rsandbox-server` binaries as static PIEs: the C library, and
//! the unwinder, inside them.
//!
//! Every rsandbox command starts this binary, so its process start is the floor under
//! `rsandbox exec` (bench P6). Linked against the shared C library, each start runs the
//! dynamic loader: it maps `libc.so.6` and `libm.so.6`, resolves the binary's symbols
//! against them (all at once: the binary is linked `-z now`) and applies their own
//! relocations. A static PIE relocates itself and nothing more, and keeps what the
//! dynamic binary had: a random load address (PIE), full RELRO, and the C library of this
//! machine, copied in when it is linked (`rsandbox --version` 0.73x, `exec --
//! /bin/true` 0.87x of the dynamic build: `farm-bench -n 100 --vs`, paired).
//!
//! How, for this one binary and with a plain `cargo build`: rustc names its native
//! libraries as `-lc`, `-lm`, `-lgcc_s` and so on, and the linker takes, directory by
//! directory, the first `libNAME.so` or `libNAME.a` it finds; a directory of our own,
//! searched before the system's, holds only static archives under those names
//! (`libgcc_s.a` is GCC's `libgcc_eh.a`, the same unwinder without the shared library's
//! constructor, whose twelve `cpuid` instructions each trap to the hypervisor in a
//! virtual machine), and `-static-pie` makes the C compiler start the program with
//! `rcrt1.o`, the start file that relocates a static PIE. Both are link arguments of
//! these two binaries only (`rustc-link-arg-bin`): the workspace's other binaries, the
//! zygote (which links `libR.so`) among them, and the tests link as before.
//! `-C target-feature=+crt-static` would say the same, but only for the whole build.
//!
//! Name resolution stays the machine's: the static C library reads `/etc/hosts` and asks
//! the DNS servers of `/etc/resolv.conf` itself; other NSS sources (mDNS, LDAP) would be
//! loaded from the system's shared libraries. Where the C compiler lacks any of these
//! archives, the build says which and links the binary dynamically, as before: this is
//! start-up time, not a security layer.
use std::path::PathBuf;
use std::process::Command;

/// The binaries linked this way: the command line and its server.
const BINARIES: [&str; 2] = ["rsandbox", "rsandbox-server"];

/// The libraries rustc links the standard library against, by the names it gives them.
/// `gcc_s` is the unwinder, taken from GCC's `libgcc_eh.a`.
const LIBRARIES: [(&str, &str); 7] = [
    ("gcc_s", "libgcc_eh.a"),
    ("c", "libc.a"),
    ("m", "libm.a"),
    ("pthread", "libpthread.a"),
    ("rt", "librt.a"),
    ("dl", "libdl.a"),
    ("util", "libutil.a"),
];

fn main() {
    // Built for musl (`scripts/build-release.sh`), the standard library is linked
    // statically already, against musl's own archives: glibc's must not come near it.
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu") {
        return;
    }
    println!("cargo:rerun-if-env-changed=CC");
    let cc = std::env::var("CC").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "cc".to_string());
    let dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("static-libraries");
    match static_archives(&cc) {
        Ok(archives) => {
            std::fs::create_dir_all(&dir).expect("create OUT_DIR/static-libraries");
            for (name, archive) in archives {
                let link = dir.join(format!("lib{name}.a"));
                // A copy of the archive would be ~6 MB; a symbolic link, read at link time,
                // is enough. Made anew: the compiler's files may have moved since the last build.
                match std::fs::remove_file(&link) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => panic!("remove {}: {e}", link.display()),
                }
                std::os::unix::fs::symlink(&archive, &link).expect("link a static archive into OUT_DIR");
                println!("cargo:rerun-if-changed={}", archive.display());
            }
            for bin in BINARIES {
                println!("cargo:rustc-link-arg-bin={bin}=-L{}", dir.display());
                println!("cargo:rustc-link-arg-bin={bin}=-static-pie");
            }
        }
        Err(missing) => println!(
            "cargo:warning=`{cc}` has no {missing}: rsandbox is linked against the shared C library (about 0.4 ms more per command)"
        ),
    }
}

/// Each library's static archive and `rcrt1.o`, or the first of them the C compiler
/// does not have (`-print-file-name` echoes the bare name when it has no such file).
fn static_archives(cc: &str) -> Result<Vec<(&'static str, PathBuf)>, &'static str> {
    if find(cc, "rcrt1.o").is_none() {
        return Err("rcrt1.o (the start file of a static PIE)");
    }
    LIBRARIES.iter().map(|&(name, file)| find(cc, file).map(|path| (name, path)).ok_or(file)).collect()
}

fn find(cc: &str, file: &str) -> Option<PathBuf> {
    let out = Command::new(cc).arg(format!("-print-file-name={file}")).output().ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
