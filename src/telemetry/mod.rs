//! Prometheus metrics: the process-wide recorder, the counters recorded where things happen, and
//! the `/hook` latency histogram.

pub(crate) mod logging;
pub mod notice;
pub mod warn;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use strum::{EnumIter, IntoEnumIterator, IntoStaticStr};

/// `/hook` latency buckets in seconds: the interesting range is well under the bus's 5 s.
const HOOK_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 2.5, 5.0,
];

pub const DELIVERIES: &str = "wakebridge_deliveries_total";
pub const REJECTIONS: &str = "wakebridge_rejections_total";
pub const ERRORS: &str = "wakebridge_errors_total";
pub const HOOK_SECONDS: &str = "wakebridge_hook_duration_seconds";
pub const LIMIT_RESUMES: &str = "wakebridge_limit_resumes_total";
pub const NOTICES: &str = "wakebridge_notices_total";

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
        // Samples are kept until upkeep folds them in; without a scraper memory grew unbounded.
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

/// How one step of the resume at a usage limit's reset went: the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumIter, IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum LimitResume {
    Typed,
    /// Not typed this time (a turn, a draft, a failure); tried again.
    NotTyped,
    /// Out of tries: held until the session shows life.
    GaveUp,
    /// The session worked again before the resume.
    Lifted,
}

pub fn limit_resume(outcome: LimitResume) {
    metrics::counter!(LIMIT_RESUMES, "outcome" => <&str>::from(outcome)).increment(1);
}

/// Makes every counter series exist at 0, so `rate()` sees a first event. After `handle()`.
pub fn start_at_zero(
    actions: impl IntoIterator<Item = &'static str>,
    reasons: impl IntoIterator<Item = &'static str>,
    error_kinds: impl IntoIterator<Item = &'static str>,
) {
    for action in actions {
        for duplicate in ["true", "false"] {
            metrics::counter!(DELIVERIES, "action" => action, "duplicate" => duplicate)
                .increment(0);
        }
    }
    for reason in reasons {
        metrics::counter!(REJECTIONS, "reason" => reason).increment(0);
    }
    for kind in error_kinds {
        metrics::counter!(ERRORS, "kind" => kind).increment(0);
    }
    for outcome in LimitResume::iter() {
        metrics::counter!(LIMIT_RESUMES, "outcome" => <&str>::from(outcome)).increment(0);
    }
    for outcome in notice::NoticeOutcome::iter() {
        metrics::counter!(NOTICES, "outcome" => <&str>::from(outcome)).increment(0);
    }
}

pub fn notice_outcome(outcome: notice::NoticeOutcome) {
    metrics::counter!(NOTICES, "outcome" => <&str>::from(outcome)).increment(1);
}

pub fn hook_latency(seconds: f64) {
    metrics::histogram!(HOOK_SECONDS).record(seconds);
}
