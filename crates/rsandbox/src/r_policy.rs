//! The lockdown policy for a sandbox (an R child, or a program under `rsandbox exec`):
//! what it needs to read, write and execute, nothing else. What a program needs to be
//! executable besides itself (its ELF loader, its `#!` interpreter) is decided here.

use crate::config::EngineConfig;
use crate::errors::EngineError;
use crate::options::EvalOptions;
use crate::system_trees::SYSTEM_READ_ONLY;
use crate::workspace::Workspace;
use crate::zygote::ZygoteInfo;
use lockdown::policy::{READ_ONLY_DEVICES, READ_WRITE_DEVICES};
use lockdown::{Limits, Policy, WorkspaceQuota};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// What every sandbox gets, R or not: system libraries read-only, its workspace (on a
/// quota'd tmpfs) and /dev/null read-write, the limits asked for, its own identity when
/// root. No network, nothing executable, no violation report (callers add those).
pub fn base_policy(workspace: &Workspace, options: &EvalOptions, config: &EngineConfig) -> Policy {
    let mut read_write = vec![workspace.path().to_path_buf()];
    read_write.extend(READ_WRITE_DEVICES.iter().map(PathBuf::from));
    Policy {
        read_only: SYSTEM_READ_ONLY.iter().chain(READ_ONLY_DEVICES.iter()).map(PathBuf::from).collect(),
        read_write,
        executable: Vec::new(),
        network: false,
        limits: Limits {
            memory: options.memory,
            cpu_seconds: options.cpu_seconds,
            file_size: options.file_size,
            processes: options.processes,
            open_files: options.open_files,
            stack: None,
        },
        run_as: workspace.identity(),
        namespaces: config.namespaces,
        // The quota is a tmpfs in a mount namespace of the sandbox's own; without
        // namespaces (`--no-namespaces`, for containers that refuse them) the workspace
        // is a plain private directory and the quota is not enforced (`layers` says so).
        workspace_quota: options
            .disk
            .filter(|_| config.namespaces)
            .map(|bytes| WorkspaceQuota { path: workspace.path().to_path_buf(), bytes }),
        // The private root rides on the quota's tmpfs (and mount namespace).
        private_root: options.disk.is_some() && config.namespaces,
        best_effort: config.best_effort,
        keep_fds_below: 3,
        violation_fd: None,
        visible_only: Vec::new(),
        nice: config.nice,
        learning: false,
    }
}

/// The policy for one R child: the base, plus R's home and libraries, and the violation
/// report socket on fd 4 (fds 0-4 survive: stdio, channel, violation socket).
///
/// `programs` is what [`executables`] made of the profile's `exec`. The profile adds its
/// read and write paths; its package allowlist keeps, in every R library,
/// only the allowed packages (and entries that are no packages), so the others do not
/// exist in the sandbox's root.
pub fn r_child_policy(
    info: &ZygoteInfo,
    workspace: &Workspace,
    options: &EvalOptions,
    config: &EngineConfig,
    allowed_packages: Option<&std::collections::BTreeSet<String>>,
    programs: &[PathBuf],
) -> Policy {
    let mut policy = base_policy(workspace, options, config);
    policy.read_only.push(info.r_home.clone());
    policy.read_only.extend(info.r_directories.iter().map(|(_, dir)| dir.clone()));
    policy.read_only.extend(info.library_paths.iter().cloned());
    policy.read_only.extend(config.profile.read.iter().cloned());
    policy.read_write.extend(config.profile.write.iter().cloned());
    policy.executable = programs.to_vec();
    policy.network = options.network.as_ref().is_some_and(crate::network::Network::is_on);
    if let Some(allowed) = allowed_packages {
        policy.visible_only = libraries(info)
            .into_iter()
            .map(|dir| {
                let entries = std::fs::read_dir(&dir)
                    .map(|d| {
                        d.flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .filter(|name| allowed.contains(name) || !dir.join(name).join("DESCRIPTION").exists())
                            .collect()
                    })
                    .unwrap_or_default();
                lockdown::VisibleOnly { dir, entries }
            })
            .collect();
    }
    policy.keep_fds_below = 5;
    policy.violation_fd = Some(4);
    policy.learning = config.learning;
    policy
}

/// What a profile's `exec` lets run: nothing when it is empty; else its programs, R's
/// own `bin` tree (`R CMD`, `Rscript`, R itself: a script R runs may call them), and
/// the interpreters all of them need (the ELF loader, `#!` shells).
///
/// The loader must be executable for any dynamically linked program to start, and it
/// will load and run any readable program it is handed (`ld.so /usr/bin/x`): the
/// listed programs are the ones `execve` starts, not the only code that can run. That
/// is no more than native code in R can do under every profile, and whatever runs is
/// inside every other layer (files, network, limits).
pub fn executables(info: &ZygoteInfo, exec: &[PathBuf]) -> Vec<PathBuf> {
    if exec.is_empty() {
        return Vec::new();
    }
    let mut programs = exec.to_vec();
    let r_bin = info.r_home.join("bin");
    programs.push(r_bin.clone());
    // R's bin tree holds scripts (whose shell is listed or added below) and the R binary.
    programs.extend([r_bin.join("R"), r_bin.join("exec").join("R")].into_iter().filter(|p| p.is_file()));
    let mut all: Vec<PathBuf> = Vec::new();
    for program in programs {
        // A file whose header cannot be read keeps no interpreter: it fails to start
        // (closed), and the other programs keep theirs.
        for path in with_interpreters(std::slice::from_ref(&program)).unwrap_or_else(|_| vec![program.clone()]) {
            if !all.contains(&path) {
                all.push(path);
            }
        }
    }
    all
}

/// Every R library: R's own and the zygote's `.libPaths()`.
pub fn libraries(info: &ZygoteInfo) -> Vec<PathBuf> {
    let mut all = vec![info.r_home.join("library")];
    all.extend(info.library_paths.iter().filter(|p| **p != info.r_home.join("library")).cloned());
    all
}

/// The environment of a sandbox in `workspace`: a fixed allowlist, nothing inherited.
pub fn base_environment(workspace: &Workspace) -> Vec<(String, String)> {
    let ws = workspace.path().to_string_lossy().into_owned();
    vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("HOME".into(), ws.clone()),
        ("TMPDIR".into(), ws),
        ("LANG".into(), "C.UTF-8".into()),
        ("TZ".into(), std::env::var("TZ").unwrap_or_else(|_| "UTC".into())),
    ]
}

/// An R child's whole environment: the base, plus R_HOME, R's own trees and
/// single-threaded BLAS/OpenMP.
pub fn r_child_environment(info: &ZygoteInfo, workspace: &Workspace) -> Vec<(String, String)> {
    let mut env = base_environment(workspace);
    env.extend([
        ("R_HOME".into(), info.r_home.to_string_lossy().into_owned()),
        ("OMP_NUM_THREADS".into(), "1".into()),
        ("OPENBLAS_NUM_THREADS".into(), "1".into()),
    ]);
    env.extend(info.r_directories.iter().map(|(name, dir)| (name.clone(), dir.to_string_lossy().into_owned())));
    env
}

/// The interpreter a file needs to run: ELF `PT_INTERP` or a `#!` line. Reads only the
/// file's header, program headers and the interpreter's name, never the whole file.
pub fn interpreter_of(path: &Path) -> io::Result<Option<PathBuf>> {
    use std::os::unix::fs::FileExt;
    let file = File::open(path)?;
    // One read of the first page, which holds the `#!` line or, in every ELF we met, the
    // program headers and the interpreter's name too (issue #26: `Read::take` read it
    // in 32, 32, 64… byte pieces, a system call each, twice per `exec`).
    let mut page = vec![0u8; 4096];
    let mut len = 0;
    while len < page.len() {
        match file.read_at(&mut page[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let head = &page[..len];
    // `size` bytes at `offset`: from the first page when they are in it.
    let bytes_at = |offset: u64, size: usize| -> io::Result<Vec<u8>> {
        match head.get(offset as usize..).and_then(|rest| rest.get(..size)) {
            Some(bytes) => Ok(bytes.to_vec()),
            None => {
                let mut bytes = vec![0u8; size];
                file.read_exact_at(&mut bytes, offset)?;
                Ok(bytes)
            }
        }
    };
    if let Some(rest) = head.strip_prefix(b"#!") {
        let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
        let text = String::from_utf8_lossy(line);
        return Ok(text.split_whitespace().next().map(PathBuf::from));
    }
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 {
        return Ok(None); // not a 64-bit ELF: nothing we know how to read
    }
    let u16_at = |buf: &[u8], o: usize| u16::from_le_bytes([buf[o], buf[o + 1]]) as u64;
    let u32_at = |buf: &[u8], o: usize| u32::from_le_bytes(buf[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |buf: &[u8], o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().expect("8 bytes"));
    let (phoff, phentsize, phnum) = (u64_at(head, 32), u16_at(head, 54), u16_at(head, 56));
    if phentsize < 56 || phnum > 256 {
        return Ok(None); // not program headers we understand
    }
    let headers = bytes_at(phoff, (phentsize * phnum) as usize)?;
    for ph in headers.chunks_exact(phentsize as usize) {
        const PT_INTERP: u32 = 3;
        if u32_at(ph, 0) == PT_INTERP {
            let (offset, size) = (u64_at(ph, 8), u64_at(ph, 32));
            if size > 4096 {
                return Ok(None);
            }
            let name = bytes_at(offset, size as usize)?;
            let text = String::from_utf8_lossy(&name).trim_end_matches('\0').to_string();
            return Ok(Some(PathBuf::from(text)));
        }
    }
    Ok(None)
}

/// `programs` and what running them executes as well: the interpreter of each file (an
/// ELF's dynamic loader, a script's `#!` program) and that interpreter's own. Trees
/// (directories) are kept as they are.
pub fn with_interpreters(programs: &[PathBuf]) -> Result<Vec<PathBuf>, EngineError> {
    let mut all: Vec<PathBuf> = programs.to_vec();
    for program in programs.iter().filter(|p| p.is_file()) {
        let mut current = program.clone();
        // A script's interpreter may be a script (at most one level, as the kernel allows).
        for _ in 0..2 {
            let Some(interp) =
                interpreter_of(&current).map_err(EngineError::io(format!("read {}", current.display())))?
            else {
                break;
            };
            let interp = interp.canonicalize().unwrap_or(interp);
            if !all.contains(&interp) {
                all.push(interp.clone());
            }
            current = interp;
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters_of_elf_script_and_plain_files() {
        let elf = interpreter_of(Path::new("/bin/true")).unwrap().expect("a dynamic ELF names its loader");
        assert!(elf.to_string_lossy().contains("ld-linux"), "{elf:?}");
        let dir = std::env::temp_dir().join(format!("rsandbox-interp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("script"), "#!/bin/sh -e\necho hi\n").unwrap();
        std::fs::write(dir.join("plain"), "not a program").unwrap();
        assert_eq!(interpreter_of(&dir.join("script")).unwrap(), Some(PathBuf::from("/bin/sh")));
        assert_eq!(interpreter_of(&dir.join("plain")).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
