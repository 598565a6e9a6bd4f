//! Engine errors: bad input (the caller's fault, nothing was started) versus engine
//! failures (the sandbox could not be set up or the zygote is gone).

use thiserror::Error;

/// Input rejected before anything ran.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum InputError {
    /// Empty or whitespace-only code.
    #[error("no code to evaluate")]
    EmptyCode,
    /// Code over the size limit.
    #[error("code is {bytes} bytes; the limit is {max}")]
    CodeTooLarge {
        /// Size given.
        bytes: usize,
        /// Limit.
        max: usize,
    },
    /// Code with a NUL byte (R strings cannot hold one).
    #[error("code contains a NUL byte")]
    NulInCode,
    /// A source file that cannot be read.
    #[error("cannot read {path}: {reason}")]
    File {
        /// The path given.
        path: String,
        /// Why.
        reason: String,
    },
    /// Code that is not UTF-8.
    #[error("code is not valid UTF-8")]
    NotUtf8,
    /// A profile that cannot be used (unknown key, bad value, missing package).
    #[error("profile {origin}: {message}")]
    Profile {
        /// The built-in name or file.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// The profile's function allowlist refused the code before it ran.
    #[error("{0}")]
    NotAllowed(String),
    /// A limit that makes no sense.
    #[error("invalid {what}: {value}")]
    BadLimit {
        /// Which limit.
        what: String,
        /// The value given.
        value: String,
    },
    /// A network allowlist that cannot be used, or a request's that would widen the
    /// server's.
    #[error("{message}")]
    BadNetwork {
        /// What is wrong, naming the key and the entry.
        message: String,
    },
    /// An invalid package name for preloading.
    #[error("invalid package name {0:?}")]
    BadPackage(String),
    /// A program to run (`exec`) that does not exist.
    #[error("program {program:?} not found{where_}")]
    NoProgram {
        /// The name given.
        program: String,
        /// Where it was looked for, for a bare name.
        where_: String,
    },
    /// A workspace file or snapshot request refused (path, size, type).
    #[error("{0}")]
    Workspace(String),
    /// `globals` that are not values in the typed encoding ([`crate::values`]).
    #[error("bad globals: {0}")]
    BadGlobals(String),
}

/// Anything that stops an evaluation from producing a result.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// See [`InputError`].
    #[error(transparent)]
    Input(#[from] InputError),
    /// The zygote binary could not be found or started.
    #[error("failed to start the zygote: {0}")]
    ZygoteStart(String),
    /// The zygote died or broke protocol.
    #[error("the zygote is gone: {0}")]
    ZygoteGone(String),
    /// The child could not lock itself down; nothing ran (fail closed).
    #[error("the sandbox could not be set up: {0}")]
    Setup(String),
    /// The session is running another execute.
    #[error("session {0} is busy with another execute")]
    Busy(String),
    /// The kernel or the runtime refused a layer that the engine can be configured to run
    /// without; nothing ran. Fronts add how their users choose that (a CLI flag, …).
    #[error("the sandbox could not be set up: {error}. {}", layer.consequence())]
    LayerRefused {
        /// The layer refused.
        layer: RefusedLayer,
        /// What the lockdown reported.
        error: String,
    },
    /// The server's budget for sandboxes is spent (the workspace quotas of the live
    /// sandboxes); try again when some have ended.
    #[error("no room for another sandbox: {0}")]
    Capacity(String),
    /// No pool slot became free in time.
    #[error("no sandbox became free within {0:?}")]
    AcquireTimeout(std::time::Duration),
    /// A system call in the supervisor failed.
    #[error("failed to {what}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A layer this environment refuses, which an engine can be configured to go without.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusedLayer {
    /// New namespaces (a container runtime's default seccomp profile refuses them):
    /// `EngineConfig::namespaces = false`.
    Namespaces,
    /// Landlock (an old kernel, or a runtime such as gVisor): `EngineConfig::best_effort`.
    Landlock,
    /// The private root, which needs `/` to be a mount point (a chroot is not):
    /// `EngineConfig::namespaces = false`.
    PrivateRoot,
}

impl RefusedLayer {
    /// Every refusable layer.
    pub const ALL: [RefusedLayer; 3] = [RefusedLayer::Namespaces, RefusedLayer::Landlock, RefusedLayer::PrivateRoot];

    /// What running without the layer keeps, in the engine's terms (no front's option).
    pub fn consequence(self) -> &'static str {
        match self {
            RefusedLayer::Namespaces => {
                "This environment refuses new namespaces (a container runtime's default seccomp profile does); \
                 without them every other layer still holds"
            }
            RefusedLayer::Landlock => {
                "This kernel (or runtime, such as gVisor) offers no Landlock; without it the private root, \
                 seccomp, rlimits and the uid drop still hold"
            }
            RefusedLayer::PrivateRoot => {
                "The root directory is not a mount point, so no private root can be made; without namespaces \
                 every other layer still holds (host paths stay unreadable, but visible to stat; the workspace \
                 is a plain directory without a quota)"
            }
        }
    }
}

/// Whether `error` is the server out of file descriptors (its own limit, or the system's
/// table): the server's capacity wherever it is met, never a failure of the sandbox.
pub fn out_of_descriptors(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

impl EngineError {
    /// Wrap an I/O error with what was being done. Running out of file descriptors is
    /// the server's capacity, not a failure: [`EngineError::Capacity`], naming the limit.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EngineError {
        let what = what.into();
        move |source| match source.raw_os_error() {
            Some(libc::EMFILE) => {
                let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
                let limit = limit.map_or_else(|| "unlimited".to_string(), |n| n.to_string());
                EngineError::Capacity(format!(
                    "the server has as many files open as its limit allows ({limit}; each sandbox holds about \
                     nine), so it could not {what}: close sessions, or raise the limit (ulimit -n)"
                ))
            }
            Some(libc::ENFILE) => EngineError::Capacity(format!(
                "the system's table of open files is full, so the server could not {what} (fs.file-max)"
            )),
            _ => EngineError::Io { what, source },
        }
    }
}
