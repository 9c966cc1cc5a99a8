//! The sender: what the rate limit lets through goes to the webhook and (`bus = true`) to the bus
//! as an `info` event, which wakes nobody. One bounded attempt each; nothing is retried.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::header::CONTENT_TYPE;
use serde_json::json;
use tokio::sync::mpsc::Receiver;
use tokio_util::sync::CancellationToken;

use super::{Format, HourlyCap, NotifyConfig, message};
use crate::bus::BusClient;
use crate::store::Store;
use crate::telemetry::notice::{Notice, NoticeOutcome};
use crate::telemetry::warn::Warnings;
use crate::warn_limited;

/// One attempt's budget, for the webhook and the bus each.
const SEND_BUDGET: Duration = Duration::from_secs(5);
pub const EVENT_TYPE: &str = "wakebridge_notice";

pub async fn run(
    config: NotifyConfig,
    bus_url: String,
    store: Store,
    mut notices: Receiver<Notice>,
    shutdown: CancellationToken,
) {
    let mut cap = HourlyCap::new(config.max_per_hour);
    let warnings = Warnings::default();
    let http = crate::http_client(SEND_BUDGET);
    let bus = config
        .bus
        .then(|| BusClient::with_timeout(&bus_url, SEND_BUDGET))
        .transpose();
    let (http, bus) = match (http, bus) {
        (Ok(http), Ok(bus)) => (http, bus),
        (Err(e), _) => {
            tracing::warn!(error = %e, "notifications are off: cannot build the HTTP client");
            return;
        }
        (_, Err(e)) => {
            tracing::warn!(error = %e, "notifications are off: cannot reach the bus");
            return;
        }
    };
    loop {
        let Some(Some(notice)) = shutdown.run_until_cancelled(notices.recv()).await else {
            return;
        };
        if !cap.admit(Instant::now()) {
            tracing::debug!(
                session_id = notice.session_id,
                kind = notice.kind.as_str(),
                "notice held back by the hourly cap"
            );
            crate::telemetry::notice_outcome(NoticeOutcome::Limited);
            continue;
        }
        let project = project_of(&store, &notice.session_id).await;
        let (title, text) = message(&notice, project.as_deref());
        let mut failed = false;
        if let Some(url) = &config.url {
            let request = match config.format {
                Format::Plain => http
                    .post(url.clone())
                    .header("Title", &title)
                    .header("Tags", notice.kind.as_str())
                    .header(CONTENT_TYPE, "text/plain; charset=utf-8")
                    .body(text.clone()),
                Format::Json => http.post(url.clone()).json(&json!({ "text": text })),
            };
            let answer = request
                .send()
                .await
                .and_then(reqwest::Response::error_for_status);
            if let Err(e) = answer {
                failed = true;
                warn_limited!(warnings, "webhook", error = %e, "notice not delivered to [notify] url; check it (a push service or a Slack-compatible webhook)");
            }
        }
        if let Some(bus) = &bus {
            let event = json!({
                "event_type": EVENT_TYPE,
                "payload": text,
                "channel": format!("session:{}", notice.session_id),
                "signal_level": "info",
            });
            if let Err(e) = bus.call_tool("publish_event", event).await {
                failed = true;
                warn_limited!(warnings, "bus", error = %e, "notice not published on the bus");
            }
        }
        crate::telemetry::notice_outcome(if failed {
            NoticeOutcome::Failed
        } else {
            NoticeOutcome::Sent
        });
        tracing::info!(
            session_id = notice.session_id,
            kind = notice.kind.as_str(),
            failed,
            "notice: {text}"
        );
    }
}

/// The project a session works in (its cwd's last component), from the ledger.
async fn project_of(store: &Store, session_id: &str) -> Option<String> {
    let (store, sid) = (store.clone(), session_id.to_owned());
    let row = tokio::task::spawn_blocking(move || store.session(&sid)).await;
    let cwd = row.ok()?.ok()??.cwd?;
    let name = Path::new(&cwd).file_name()?;
    Some(name.to_string_lossy().into_owned())
}
