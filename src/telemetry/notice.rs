//! Notices for a human (a session fell silent, hit its limit, reached the checkpoint, was
//! resumed, cannot be woken): [`Notices`] is the handle features hold; it never blocks. Sending
//! them is `notify`'s. A notice carries only wakebridge's own facts, never an event's payload.

use strum::{EnumIter, IntoStaticStr};
use tokio::sync::mpsc;

/// Notices queued at most; more are dropped (and counted): a stuck webhook never holds a wake.
const QUEUE: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, EnumIter, IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum NoticeKind {
    /// The nudger gave up on the session until it shows life.
    AcknowledgedIdle,
    UsageLimit,
    /// The context window passed the checkpoint threshold.
    Checkpoint,
    /// Resumed after its usage limit reset.
    Resumed,
    /// Wakes failed this many times in a row.
    WakeFailing,
}

crate::strum_as_str!(NoticeKind);

/// A short detail in our own words, never an event's payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub session_id: String,
    pub kind: NoticeKind,
    pub detail: String,
}

impl Notice {
    pub fn new(session_id: &str, kind: NoticeKind, detail: impl Into<String>) -> Notice {
        Notice {
            session_id: session_id.to_owned(),
            kind,
            detail: detail.into(),
        }
    }
}

/// Where features hand notices; a clone shares the queue. The default drops everything.
#[derive(Debug, Clone, Default)]
pub struct Notices(Option<mpsc::Sender<Notice>>);

impl Notices {
    pub fn channel() -> (Notices, mpsc::Receiver<Notice>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Notices(Some(tx)), rx)
    }

    /// Queues `notice` without waiting; a full or closed queue drops it.
    pub fn send(&self, notice: Notice) {
        if let Some(tx) = &self.0
            && tx.try_send(notice).is_err()
        {
            super::notice_outcome(NoticeOutcome::Dropped);
        }
    }
}

/// How a notice ended: the `outcome` label of `wakebridge_notices_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumIter, IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum NoticeOutcome {
    Sent,
    /// Within the rate limit's gap, or past its hourly cap.
    Limited,
    Failed,
    /// The queue was full.
    Dropped,
}
