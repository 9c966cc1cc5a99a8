//! Prometheus metrics: one process-wide recorder (the `metrics` facade), counters recorded where
//! things happen (deliveries by action, rejections by reason, errors by kind), a latency
//! histogram for `/hook`, and gauges computed at scrape time from the session status.

pub(crate) mod logging;
pub mod warn;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// `/hook` latency buckets in seconds: the interesting range is well under the bus's 5 s.
const HOOK_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 2.5, 5.0,
];

pub const DELIVERIES: &str = "wakebridge_deliveries_total";
pub const REJECTIONS: &str = "wakebridge_rejections_total";
pub const ERRORS: &str = "wakebridge_errors_total";
pub const HOOK_SECONDS: &str = "wakebridge_hook_duration_seconds";
pub const LIMIT_RESUMES: &str = "wakebridge_limit_resumes_total";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often buffered histogram samples are folded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Installs the recorder on first use and returns the handle that renders it.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Full(HOOK_SECONDS.into()),
                &HOOK_BUCKETS,
            )
            .map(metrics_exporter_prometheus::PrometheusBuilder::build_recorder)
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        // The recorder keeps every histogram sample until upkeep folds it into the buckets; only
        // a scrape would otherwise do that, so without a scraper memory grew with every request.
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("wakebridge-metrics".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the metrics upkeep thread; /hook latency samples are folded in at each scrape only");
        }
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "a metrics recorder was already installed; /metrics shows only scrape-time gauges"
            );
        }
        handle
    })
}

pub fn delivered(action: &'static str, duplicate: bool) {
    metrics::counter!(DELIVERIES, "action" => action, "duplicate" => if duplicate { "true" } else { "false" }).increment(1);
}

pub fn rejected(reason: &'static str) {
    metrics::counter!(REJECTIONS, "reason" => reason).increment(1);
}

pub fn error(kind: &'static str) {
    metrics::counter!(ERRORS, "kind" => kind).increment(1);
}

/// A step of the resume at a usage limit's reset: `typed`, `not-typed`, `gave-up`, `lifted`.
pub fn limit_resume(outcome: &'static str) {
    metrics::counter!(LIMIT_RESUMES, "outcome" => outcome).increment(1);
}

pub fn hook_latency(seconds: f64) {
    metrics::histogram!(HOOK_SECONDS).record(seconds);
}
