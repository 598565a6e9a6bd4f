//! The lockdown policy for an R child: what R needs to read, nothing else.

use crate::options::{EngineConfig, EvalOptions};
use crate::workspace::Workspace;
use crate::zygote::ZygoteInfo;
use lockdown::policy::{READ_ONLY_DEVICES, READ_WRITE_DEVICES};
use lockdown::{Limits, Policy, WorkspaceQuota};
use std::path::PathBuf;

/// System trees R and its shared libraries are loaded from. No home directory, no
/// `/etc` beyond R's own configuration, fonts, the dynamic linker cache and the time zone.
pub const SYSTEM_READ_ONLY: [&str; 12] = [
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/etc/R",
    "/etc/fonts",
    // fontconfig's cache: without it the first plot in a child rescans every font.
    "/var/cache/fontconfig",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/timezone",
    "/usr/share/zoneinfo",
];

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
        for path in
            crate::exec::with_interpreters(std::slice::from_ref(&program)).unwrap_or_else(|_| vec![program.clone()])
        {
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
