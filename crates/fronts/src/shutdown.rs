//! When a network server stops: SIGINT or SIGTERM (then it finishes what runs, ends
//! every sandbox and exits 0).

/// Installs the SIGINT and SIGTERM handlers at once, and resolves at the first signal.
/// Call it before the server says where it listens: a signal sent as soon as that line
/// appears (a supervisor stopping a server it just started) then stops it cleanly,
/// where a handler installed at the first poll left it to the default action (killed,
/// its workspaces left behind). Call inside the runtime.
pub fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
    async move {
        match handlers {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            // Without signal handlers the server runs until killed.
            _ => std::future::pending::<()>().await,
        }
    }
}
