//! Sessions carried from a replica that stops gracefully to whichever replica is next
//! asked for them (`serve --http --snapshot-dir DIR`, DIR a volume the replicas share).
//!
//! At SIGTERM the replica writes `DIR/<node>.draining`; once its running requests are
//! done it saves each live session as `DIR/<id>.json` (the owner's token name, the limits,
//! the tools' descriptions and the session's snapshot), then removes the marker. A
//! replica asked for a session it does not hold whose id names another node claims that
//! file with one atomic rename (so exactly one replica restores it), restores the session
//! under the same id for the same token, and serves the request. While the other node's
//! marker is there, it waits for the file rather than answering `session_lost` early.
//!
//! What survives is what `POST /v1/sessions/{id}/snapshot` keeps: the global
//! environment's values. Not the workspace's files, open connections or running code;
//! a killed replica saves nothing. The files are data that is only ever loaded inside a
//! sandbox, and only for an id this module's checks accept as one `rsandbox::ids` made
//! (its characters cannot name another path).

use super::state::AppState;
use crate::core::bridge::ToolBridge;
use crate::core::registry::{NewEntry, Owner};
use rsandbox::{EvalOptions, ToolSpec};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The format of a saved session.
const VERSION: u32 = 1;
/// A saved session larger than this is not read (a snapshot is a session's data, bounded
/// by what the sandbox could hold; this keeps a stray file from filling the server).
const MAX_FILE: u64 = 1 << 30;
/// How long a request waits for the sessions of a node that is draining.
const WAIT_FOR_DRAIN: Duration = Duration::from_secs(60);

/// A session as saved.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    version: u32,
    session: String,
    owner: String,
    limits: EvalOptions,
    tools: Vec<ToolSpec>,
    snapshot: String,
}

/// The shared directory, and the lock that makes one restore at a time on this replica
/// (a second request for the same session then finds it restored).
pub struct CarryOver {
    dir: PathBuf,
    restoring: Mutex<()>,
}

impl CarryOver {
    /// Sessions saved into and restored from `dir`, which must be a directory.
    pub fn new(dir: PathBuf) -> Result<CarryOver, String> {
        if !dir.is_dir() {
            return Err(format!("--snapshot-dir {}: not a directory", dir.display()));
        }
        Ok(CarryOver { dir, restoring: Mutex::new(()) })
    }

    /// Where session `id` is saved: only for an id of the shape `rsandbox::ids` makes.
    fn file(&self, id: &str) -> Option<PathBuf> {
        rsandbox::ids::node_of(id)?;
        Some(self.dir.join(format!("{id}.json")))
    }

    fn marker(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.draining"))
    }

    /// This replica begins to stop: its sessions will be saved, so others wait for them.
    pub fn begin_drain(&self) {
        if let Err(e) = std::fs::write(self.marker(rsandbox::ids::node()), b"") {
            tracing::warn!(error = %e, "cannot write the draining marker; other replicas will not wait for this one's sessions");
        }
    }

    /// Save every live session (the running requests are done), then remove the marker.
    /// Returns how many were saved and how many could not be.
    pub fn save_all(&self, state: &AppState) -> (usize, usize) {
        let (mut saved, mut failed) = (0, 0);
        for entry in state.sessions.entries() {
            let result = entry.session().snapshot().map_err(|e| e.to_string()).and_then(|(snapshot, _)| {
                let record = Saved {
                    version: VERSION,
                    session: entry.id.clone(),
                    owner: entry.owner_token().to_string(),
                    limits: entry.options.clone(),
                    tools: entry.bridge.specs(),
                    snapshot,
                };
                self.write(&entry.id, &record)
            });
            match result {
                Ok(()) => {
                    saved += 1;
                    tracing::info!(session = %entry.id, "session saved for another replica");
                }
                Err(e) => {
                    failed += 1;
                    tracing::warn!(session = %entry.id, error = %e, "session not saved: it is lost");
                }
            }
        }
        let _ = std::fs::remove_file(self.marker(rsandbox::ids::node()));
        (saved, failed)
    }

    fn write(&self, id: &str, record: &Saved) -> Result<(), String> {
        let path = self.file(id).ok_or_else(|| format!("{id} is not a session id"))?;
        // Whole or not at all: a reader never sees half a file.
        let staging = self.dir.join(format!(".{id}.json.{}", rsandbox::ids::node()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&staging)
            .map_err(|e| format!("{}: {e}", staging.display()))?;
        serde_json::to_writer(&mut file, record).map_err(|e| e.to_string())?;
        file.flush().and_then(|()| file.sync_all()).map_err(|e| e.to_string())?;
        std::fs::rename(&staging, &path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A request of `owner` for session `id`, which this replica does not hold: restore
    /// it here if another replica saved it (waiting while that replica drains). `true`
    /// when the session is now in the registry under `id`.
    pub fn restore(&self, state: &AppState, owner: &str, id: &str) -> bool {
        let Some(path) = self.file(id) else { return false };
        let Some(node) = rsandbox::ids::node_of(id) else { return false };
        if node == rsandbox::ids::node() {
            return false;
        }
        let _one_at_a_time = self.restoring.lock().unwrap_or_else(|e| e.into_inner());
        if state.sessions.contains(id) {
            return true;
        }
        let deadline = Instant::now() + WAIT_FOR_DRAIN;
        while !path.exists() && self.marker(node).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        // The claim: one rename, which only one replica can win.
        let claimed = self.dir.join(format!("{id}.json.claimed-{}", rsandbox::ids::node()));
        if std::fs::rename(&path, &claimed).is_err() {
            return false;
        }
        match self.restore_claimed(state, owner, id, &claimed) {
            Ok(()) => {
                let _ = std::fs::remove_file(&claimed);
                tracing::info!(session = %id, from = %node, "session carried over from another replica");
                true
            }
            Err(Unclaim(why)) => {
                // Not this caller's, or not restorable here: leave it as it was.
                tracing::warn!(session = %id, reason = %why, "saved session not restored");
                let _ = std::fs::rename(&claimed, &path);
                false
            }
        }
    }

    fn restore_claimed(&self, state: &AppState, owner: &str, id: &str, claimed: &Path) -> Result<(), Unclaim> {
        let file = std::fs::File::open(claimed).map_err(|e| Unclaim(e.to_string()))?;
        let size = file.metadata().map_err(|e| Unclaim(e.to_string()))?.len();
        if size > MAX_FILE {
            return Err(Unclaim(format!("{size} bytes, over {MAX_FILE}")));
        }
        let saved: Saved =
            serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| Unclaim(e.to_string()))?;
        if saved.version != VERSION || saved.session != id {
            return Err(Unclaim("another format or another session".into()));
        }
        // Another token's session is as unknown here as anywhere (and stays saved).
        if saved.owner != owner {
            return Err(Unclaim("another token's".into()));
        }
        let options = saved.limits;
        // The saved limits were within the caps of the replica that made the session;
        // hold them to this one's too.
        if options.memory.is_some_and(|m| m > state.caps.max_memory)
            || options.timeout > state.caps.max_timeout
            || options.max_output > state.caps.max_output
        {
            return Err(Unclaim("its limits are over this server's caps".into()));
        }
        let bridge = ToolBridge::new(super::stream::NO_LISTENER);
        let tools = bridge.tools(saved.tools).map_err(Unclaim)?;
        let (session, warnings) = state
            .engine
            .restore_session(options.clone(), tools, &saved.snapshot)
            .map_err(|e| Unclaim(e.to_string()))?;
        if !warnings.is_empty() {
            tracing::info!(session = %id, warnings = ?warnings, "restored with warnings");
        }
        state
            .sessions
            .insert_as(&Owner::token(owner), id.to_string(), NewEntry { session, bridge, options, implicit: false })
            .map_err(|e| Unclaim(e.to_string()))?;
        Ok(())
    }
}

/// Why a claimed file goes back.
struct Unclaim(String);
