//! The accept loop: HTTP/1.1 connections with a header timeout (which also bounds how
//! long a kept-alive connection may sit idle: hyper starts it again after each
//! response), and a graceful stop: stop accepting, let running requests finish within a
//! grace period, then return so the caller can end every sandbox.
//!
//! Why not `axum::serve`: it builds its connections without a timer, so hyper cannot
//! apply any header or idle timeout, and a client holding connections open without
//! sending anything would hold their tasks and descriptors forever.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

/// How connections are served.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// A request's headers must arrive within this, counted from the connection's start
    /// or the previous response (so it is also the keep-alive idle timeout).
    pub header_timeout: Duration,
    /// After the stop signal, how long running requests may take before the server
    /// returns anyway.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits { header_timeout: Duration::from_secs(30), shutdown_grace: Duration::from_secs(30) }
    }
}

/// Serve `app` on `listener` until `stop` resolves; then finish within the grace period.
/// Returns whether every connection finished in time.
pub async fn run(listener: TcpListener, app: Router, limits: ConnectionLimits, stop: impl Future<Output = ()>) -> bool {
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _peer)) => stream,
                    Err(e) => {
                        // Out of descriptors and the like: wait instead of spinning; the
                        // connections already open keep being served.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                let watched = graceful.watch(connection);
                tokio::spawn(async move {
                    // A client that goes away or times out ends only its connection.
                    if let Err(e) = watched.await {
                        tracing::debug!(error = %e, "connection ended");
                    }
                });
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    tracing::info!(
        grace_s = limits.shutdown_grace.as_secs(),
        "stopping: no new connections, finishing running requests"
    );
    tokio::select! {
        () = graceful.shutdown() => true,
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!("requests still running after the grace period; ending their sandboxes");
            false
        }
    }
}
