//! `mcp-audit_log`: one JSON line per call (who, what SQL, what came of it), appended to a
//! file that is rotated to `<file>.1` when it passes `mcp-audit_log_max_bytes`.

use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The audit file writer (one at a time; opened per line so a rotated or removed file is
/// picked up at once).
#[derive(Default)]
pub(crate) struct AuditLog {
    lock: Mutex<()>,
}

impl AuditLog {
    /// Appends `entry` to `path`, rotating first when the file is over `max_bytes`.
    pub(crate) fn append(&self, path: &str, max_bytes: u64, entry: &serde_json::Value) {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if std::fs::metadata(path).is_ok_and(|m| m.len() >= max_bytes) {
            let _ = std::fs::rename(path, format!("{path}.1"));
        }
        let line = format!("{entry}\n");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            tracing::warn!("MCP audit log {path}: cannot append ({e}); the call is not audited");
        }
    }
}

/// Now as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub(crate) fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_have_the_shape() {
        let t = super::now_rfc3339();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }
}
