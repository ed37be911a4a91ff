//! Waiting for the signals that stop Sluice.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves with the name of the first SIGTERM or SIGINT received: the stop future the `sluice`
/// binary passes to [`crate::App::serve`].
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

/// SIGUSR2, the upgrade signal (`systemctl reload sluice`): each one starts a successor.
pub(crate) fn upgrade_requested() -> UpgradeSignal {
    match signal(SignalKind::user_defined2()) {
        Ok(s) => UpgradeSignal(Some(s)),
        Err(e) => {
            tracing::error!(
                "cannot install the SIGUSR2 handler: {e}; upgrade with sluice --takeover"
            );
            UpgradeSignal(None)
        }
    }
}

/// The SIGUSR2 stream, or none when it could not be installed.
pub(crate) struct UpgradeSignal(Option<tokio::signal::unix::Signal>);

impl UpgradeSignal {
    /// No SIGUSR2 handler: upgrades only by starting `sluice --takeover` by hand.
    pub(crate) fn none() -> Self {
        UpgradeSignal(None)
    }

    /// The next SIGUSR2 (never, without a handler).
    pub(crate) async fn recv(&mut self) {
        match &mut self.0 {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
}
