//! Where engines make their directories, for tests that look for them or for what they
//! left: `rsandbox-<pid>-<random>` under the temporary directory (the workspaces root)
//! and under `/dev/shm` (the mount points of workspaces with a disk quota,
//! `WorkspaceRoot::with_mount_points_in_memory`).

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

/// The directories engines make their own directories in.
pub const ENGINE_PARENTS: [&str; 2] = ["/tmp", "/dev/shm"];

/// Every entry of [`ENGINE_PARENTS`].
fn entries() -> impl Iterator<Item = fs::DirEntry> {
    ENGINE_PARENTS.iter().flat_map(|parent| fs::read_dir(parent).into_iter().flatten().flatten())
}

/// The `rsandbox-<pid>-*` directories of the engine in process `pid`.
pub fn engine_dirs_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("rsandbox-{pid}-");
    entries().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).map(|e| e.path()).collect()
}

/// Every engine's `rsandbox-<pid>-*` directory now, whoever made it.
pub fn all_engine_dirs() -> BTreeSet<PathBuf> {
    entries()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("rsandbox-").and_then(|r| r.split('-').next()).is_some_and(|p| p.parse::<u32>().is_ok())
        })
        .map(|e| e.path())
        .collect()
}
