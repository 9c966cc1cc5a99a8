//! Prometheus metrics: the counters recorded where things happen and the `/hook` latency
//! histogram, kept in one process-wide registry, and the text exposition `/metrics` writes them
//! in with the gauges it reads at scrape time. Six counter families and one histogram with
//! fixed buckets need no recorder crate: the one we had brought a thread that woke every second,
//! libm and a clock calibration into a daemon at rest (docs/design.md, "Metrics of our own").

pub(crate) mod logging;
pub mod notice;
pub mod warn;

use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::sync::{LazyLock, Mutex, PoisonError};

use strum::{EnumIter, IntoEnumIterator, IntoStaticStr};

/// `/hook` latency buckets in seconds: the interesting range is well under the bus's 5 s.
const HOOK_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 2.5, 5.0,
];
const HOOK_SECONDS: &str = "wakebridge_hook_duration_seconds";

const DELIVERIES: &str = "wakebridge_deliveries_total";
const REJECTIONS: &str = "wakebridge_rejections_total";
const ERRORS: &str = "wakebridge_errors_total";
const LIMIT_RESUMES: &str = "wakebridge_limit_resumes_total";
const NOTICES: &str = "wakebridge_notices_total";
const FLEET_REFUSED: &str = "wakebridge_fleet_refused_total";

/// The counter families: name, help and label names (the second empty for one label).
const FAMILIES: [(&str, &str, [&str; 2]); 6] = [
    (
        DELIVERIES,
        "Webhook events answered, by action and whether it was a redelivery.",
        ["action", "duplicate"],
    ),
    (
        REJECTIONS,
        "Webhook requests refused, by reason.",
        ["reason", ""],
    ),
    (
        ERRORS,
        "Wakes and spool writes that failed, by kind.",
        ["kind", ""],
    ),
    (
        LIMIT_RESUMES,
        "Steps of the resume at a usage limit's reset, by outcome.",
        ["outcome", ""],
    ),
    (NOTICES, "Notices to a human, by outcome.", ["outcome", ""]),
    (
        FLEET_REFUSED,
        "Commands from the fleet not run, by the check that refused them.",
        ["why", ""],
    ),
];

#[derive(Default)]
struct Registry {
    /// Each series' count by family name and label values.
    counters: BTreeMap<(&'static str, &'static str, &'static str), u64>,
    hook: Histogram,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);

/// The `/hook` latencies.
#[derive(Default)]
struct Histogram {
    /// Samples per bucket, not cumulative; slower ones are only in `count`.
    buckets: [u64; HOOK_BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn record(&mut self, seconds: f64) {
        if let Some(bucket) = HOOK_BUCKETS.iter().position(|&le| seconds <= le) {
            self.buckets[bucket] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }

    fn render(&self, out: &mut Exposition) {
        out.family(
            HOOK_SECONDS,
            "histogram",
            "Time from a webhook's request to its answer, in seconds.",
        );
        let bucket = format!("{HOOK_SECONDS}_bucket");
        let mut below = 0;
        for (le, count) in HOOK_BUCKETS.iter().zip(self.buckets) {
            below += count;
            out.sample(&bucket, &format!("le=\"{le}\""), below);
        }
        out.sample(&bucket, "le=\"+Inf\"", self.count);
        out.sample(&format!("{HOOK_SECONDS}_sum"), "", self.sum);
        out.sample(&format!("{HOOK_SECONDS}_count"), "", self.count);
    }
}

fn registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    // Every update leaves the registry whole, so a panic elsewhere cannot poison its counts.
    f(&mut REGISTRY.lock().unwrap_or_else(PoisonError::into_inner))
}

fn add(family: &'static str, first: &'static str, second: &'static str, n: u64) {
    registry(|r| *r.counters.entry((family, first, second)).or_default() += n);
}

pub fn delivered(action: &'static str, duplicate: bool) {
    let duplicate = if duplicate { "true" } else { "false" };
    add(DELIVERIES, action, duplicate, 1);
}

pub fn rejected(reason: &'static str) {
    add(REJECTIONS, reason, "", 1);
}

pub fn error(kind: &'static str) {
    add(ERRORS, kind, "", 1);
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
    add(LIMIT_RESUMES, outcome.into(), "", 1);
}

pub fn notice_outcome(outcome: notice::NoticeOutcome) {
    add(NOTICES, outcome.into(), "", 1);
}

/// Why a command from the fleet was not run: the checks in the order they are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumIter, IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum FleetRefusal {
    /// The bus's webhook signature (the bridge secret) does not hold.
    BusSignature,
    /// The fleet key did not sign it.
    Signature,
    /// Signed, but not a command this version reads (an unknown field, text among them).
    Malformed,
    /// Not for this machine, or not on its own channel.
    NotAddressed,
    /// Outside its lifetime, give or take a minute of clock skew.
    Expired,
    /// Run before (the ledger remembers its id).
    Replayed,
    /// A verb `[fleet] accept` leaves out.
    NotAccepted,
    /// The local route's own rules refused it (an unknown session, a message not configured).
    Rule,
    /// The ledger could not record it, so it could not be run exactly once.
    Ledger,
}

pub fn fleet_refused(why: FleetRefusal) {
    add(FLEET_REFUSED, why.into(), "", 1);
}

pub fn hook_latency(seconds: f64) {
    registry(|r| r.hook.record(seconds));
}

/// Makes every counter series exist at 0, so `rate()` sees a first event.
pub fn start_at_zero(
    actions: impl IntoIterator<Item = &'static str>,
    reasons: impl IntoIterator<Item = &'static str>,
    error_kinds: impl IntoIterator<Item = &'static str>,
) {
    for action in actions {
        for duplicate in ["true", "false"] {
            add(DELIVERIES, action, duplicate, 0);
        }
    }
    let one_label = (reasons.into_iter().map(|r| (REJECTIONS, r)))
        .chain(error_kinds.into_iter().map(|kind| (ERRORS, kind)))
        .chain(LimitResume::iter().map(|o| (LIMIT_RESUMES, o.into())))
        .chain(notice::NoticeOutcome::iter().map(|o| (NOTICES, o.into())))
        .chain(FleetRefusal::iter().map(|why| (FLEET_REFUSED, why.into())));
    for (family, label) in one_label {
        add(family, label, "", 0);
    }
}

/// Writes the counters and the `/hook` histogram.
pub(crate) fn render(out: &mut Exposition) {
    registry(|r| {
        for (name, help, [label, other]) in FAMILIES {
            out.family(name, "counter", help);
            for ((_, first, second), count) in r.counters.iter().filter(|(key, _)| key.0 == name) {
                let labels = match other {
                    "" => format!("{label}=\"{first}\""),
                    other => format!("{label}=\"{first}\",{other}=\"{second}\""),
                };
                out.sample(name, &labels, count);
            }
        }
        r.hook.render(out);
    });
}

/// Prometheus text lines. Label values are fixed short words (never ids or paths), so nothing
/// needs escaping.
pub(crate) struct Exposition<'a>(pub &'a mut String);

impl Exposition<'_> {
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    /// One line: `name{labels} value`, without braces when `labels` is empty.
    pub fn sample(&mut self, name: &str, labels: &str, value: impl Display) {
        let _ = match labels {
            "" => writeln!(self.0, "{name} {value}"),
            labels => writeln!(self.0, "{name}{{{labels}}} {value}"),
        };
    }

    /// A family with one sample per value of its one label.
    pub fn labelled<'v, V: Display>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        label: &str,
        samples: impl IntoIterator<Item = (&'v str, V)>,
    ) {
        self.family(name, kind, help);
        for (value, count) in samples {
            self.sample(name, &format!("{label}=\"{value}\""), count);
        }
    }

    pub fn gauge(&mut self, name: &str, help: &str, value: u64) {
        self.one(name, "gauge", help, value);
    }

    pub fn one(&mut self, name: &str, kind: &str, help: &str, value: impl Display) {
        self.family(name, kind, help);
        self.sample(name, "", value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_counts_each_sample_in_its_bucket_and_above() {
        let mut hook = Histogram::default();
        for seconds in [0.0003, 0.003, 0.005, 7.0] {
            hook.record(seconds);
        }
        let mut text = String::new();
        hook.render(&mut Exposition(&mut text));
        let bucket = |le: &str| format!("\n{HOOK_SECONDS}_bucket{{le=\"{le}\"}} ");
        for (le, want) in [
            ("0.0005", 1),
            ("0.002", 1),
            ("0.005", 3),
            ("5", 3),
            ("+Inf", 4),
        ] {
            assert!(
                text.contains(&format!("{}{want}\n", bucket(le))),
                "{le}: {text}"
            );
        }
        assert!(
            text.contains(&format!("\n{HOOK_SECONDS}_count 4\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("\n{HOOK_SECONDS}_sum 7.0083\n")),
            "{text}"
        );
        assert!(
            text.starts_with(&format!("# HELP {HOOK_SECONDS} ")),
            "{text}"
        );
    }
}
