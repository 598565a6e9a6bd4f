//! When a network server stops: SIGINT or SIGTERM (then it finishes what runs, ends
//! every sandbox and exits 0).

/// Resolves at SIGINT or SIGTERM.
pub async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
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
