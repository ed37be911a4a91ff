//! Waiting for the signals that stop Sluice.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves with the name of the first SIGTERM or SIGINT received.
pub async fn stop_requested() -> &'static str {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
