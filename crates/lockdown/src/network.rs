//! Step 2c: the network by proxy ([`crate::Policy::network`]), in the sandbox's own,
//! new network namespace, before the privileges are dropped (bringing `lo` up needs
//! `CAP_NET_ADMIN` in the namespace).
//!
//! The namespace holds only a loopback interface. This step brings it up, makes a TCP
//! listener on `127.0.0.1:0` there, sends it (`SCM_RIGHTS`, tag `N`) over the report
//! socket to the supervisor, which serves it (its proxy checks every connection against
//! the allowlist), and closes its own copy: nothing in the sandbox ever holds it, so the
//! sandbox can only be a client of it. Landlock then allows a TCP connect to that one
//! port and no bind (step 4), and seccomp allows only TCP client sockets (step 6).
//!
//! Without a network namespace of its own the sandbox would share the host's network,
//! so a policy with the network on and no namespace is refused (fail closed), best
//! effort or not.

use crate::errors::NetworkError;
use crate::sys;
use std::os::fd::{AsFd, RawFd};

/// The tag of the message that carries the listener on the report socket.
pub const LISTENER_TAG: &[u8] = b"N";
/// Connections waiting to be accepted by the supervisor.
const BACKLOG: i32 = 128;

/// Bring the namespace's loopback up, make the proxy listener, send it over
/// `report_socket`, close it here; the port the sandbox connects to. `namespaces` are
/// those the namespaces step made: without `net` nothing is done but the refusal.
pub fn open_proxy_listener(namespaces: &[&str], report_socket: RawFd) -> Result<u16, NetworkError> {
    if !namespaces.contains(&"net") {
        return Err(NetworkError::NoNetworkNamespace);
    }
    sys::bring_loopback_up().map_err(NetworkError::Loopback)?;
    let listener =
        sys::tcp_listener_on_loopback(BACKLOG).map_err(|(call, source)| NetworkError::Listener { call, source })?;
    let port =
        sys::local_port(listener.as_fd()).map_err(|source| NetworkError::Listener { call: "getsockname", source })?;
    // SAFETY: the caller's report socket is open for the duration of the call (the
    // policy's `violation_fd`, kept by step 1).
    let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(report_socket) };
    let sent = crate::fdpass::send(socket, LISTENER_TAG, &[listener.as_fd()]);
    // Closed whatever happened: nobody in the sandbox may accept on it.
    drop(listener);
    sent.map_err(NetworkError::Report)?;
    Ok(port)
}
