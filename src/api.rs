//! The typed `/health` and `/sessions` views and the `action` vocabulary of `/hook`, serialised by the daemon and read back by `status`,
//! `doctor`, `service` and `/metrics`, so neither end parses states out of words. `openapi.yaml`
//! documents them (a test keeps the state list equal).

use crate::agent::Agent;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use strum::{EnumIter, IntoStaticStr};

/// A session's one state, most pressing first: the order `status` lists states in and the
/// precedence the daemon decides by (a limited session with a dialog open is `limited`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    EnumIter,
    IntoStaticStr,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum SessionState {
    /// Over: no pane, nothing owed, and `SessionEnd` seen or no sign of life for a day.
    Ended,
    /// Neither mapped in panes.json nor with a live inbox: its events are spooled only.
    NoPane,
    /// A person paused it (`wakebridge pause`): nothing reaches it; its events are owed.
    Paused,
    /// Held at a usage limit until it resets (nothing typed).
    Limited,
    /// A dialog or a question waits for a human.
    Dialog,
    /// Text sits at the prompt (a human's draft): nothing is typed over it.
    Draft,
    /// A rewind or restart was asked for and waits for, or is at, its moment.
    Rewinding,
    /// Bus events wait for a wake.
    Owed,
    /// A turn runs.
    Working,
    /// Nudged `acknowledge_after` times unanswered: left alone until it shows life.
    AcknowledgedIdle,
    /// Idle after a nudge; the backoff runs.
    Nudged,
    /// Idle, not nudged since it last showed life.
    #[default]
    Idle,
}

crate::strum_as_str!(SessionState);

/// The kinds of text wakebridge sends a session, as `/metrics` labels what their turns cost.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    EnumIter,
    IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum TextKind {
    /// The wake prompt (a bus event, owed or not) or a named wake message.
    Wake,
    Nudge,
    /// A budget nudge: a window ends unused.
    Budget,
    /// A context warning.
    Warning,
    /// The resume at a usage limit's reset.
    Resume,
    /// The re-hydration after a rewind.
    Rewind,
}

/// What a sample of the page's history measures, in percent.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum HistoryKind {
    /// A session's context window used.
    Context,
    /// An account's 5-hour window used.
    FiveHour,
    /// An account's weekly window used.
    SevenDay,
}

/// `GET /history`: what the page draws over time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// The start of the span (unix seconds).
    pub from: i64,
    pub to: i64,
    /// One per session (context) or account window, oldest point first.
    pub series: Vec<HistorySeries>,
    /// Wakebridge's texts whose turns ended in each hour, by kind, oldest first.
    pub texts: Vec<TextsInHour>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistorySeries {
    pub kind: HistoryKind,
    /// The session's id, or the account's name.
    pub key: String,
    /// `[unix seconds, percent]`.
    pub points: Vec<(i64, f64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextsInHour {
    /// The hour's start (unix seconds).
    pub hour: i64,
    pub kind: TextKind,
    pub texts: u64,
    /// Tokens of the turns they started.
    pub tokens: u64,
}

/// What wakebridge's own texts cost since the start of the local day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Today {
    /// Nudges and budget nudges typed or sent.
    pub nudges: u64,
    /// Tokens of the turns wakebridge's texts started (every kind).
    pub caused_tokens: u64,
}

/// `GET /health`: the Python bridge's fields, what tells two instances apart, and the
/// configuration only where `/sessions` may be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub service: String,
    pub version: String,
    pub pid: u32,
    pub started_at: Timestamp,
    /// The TOML file the instance read (`null`: none); shown where `/sessions` would be.
    #[serde(default, skip_serializing_if = "Shown::is_hidden")]
    pub config_file: Shown<std::path::PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Only with registration on: whether the last verification found our webhook row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered: Option<bool>,
    #[serde(default, skip_serializing_if = "Shown::is_hidden")]
    pub webhook_id: Shown<i64>,
    #[serde(default, skip_serializing_if = "Shown::is_hidden")]
    pub last_verified_at: Shown<Timestamp>,
    /// With `[fleet] key_file`, shown as `config_file` is: this machine on the bus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetHealth>,
}

/// This machine in the fleet, as `/health` tells `doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetHealth {
    pub machine: String,
    /// The last heartbeat (a registration on the bus) was answered.
    pub on_bus: bool,
    /// Whether the keeper last found the fleet webhook on the bus; `null` without registration.
    pub webhook: Option<bool>,
    /// When this machine's status last went on the bus.
    pub published_at: Option<Timestamp>,
}

/// A field left out of the body, or present and possibly `null` (`config_file: null`: no file).
/// Untagged: a value is written as itself (`Hidden`, which fields skip, would be `null`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(untagged)]
pub enum Shown<T> {
    #[default]
    Hidden,
    Value(Option<T>),
}

impl<T> Shown<T> {
    fn is_hidden(&self) -> bool {
        matches!(self, Shown::Hidden)
    }

    pub fn value(&self) -> Option<&T> {
        match self {
            Shown::Value(value) => value.as_ref(),
            Shown::Hidden => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shown<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<T>::deserialize(deserializer).map(Shown::Value)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sessions {
    pub sessions: Vec<SessionStatus>,
    /// Each Claude Code account's usage windows, as its sessions' status lines reported them.
    #[serde(default)]
    pub budgets: Vec<Budget>,
    /// What wakebridge's texts cost today (`None`: the ledger could not say).
    #[serde(default)]
    pub today: Option<Today>,
    /// A pause of every session (`wakebridge pause --all`), while it lasts: shown even when no
    /// session is known yet, since it holds the ones to come.
    #[serde(default)]
    pub paused: Option<Pause>,
}

/// `GET /fleet`: every machine of the fleet, this one first, each with its last status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    pub machines: Vec<Machine>,
    /// Why only part of the fleet is shown (the bus unreachable, no key), when so.
    #[serde(default)]
    pub problem: Option<String>,
    /// Statuses on the bus whose fleet signature failed since the daemon started: not shown.
    #[serde(default)]
    pub refused: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub name: String,
    /// This daemon's own machine.
    pub this: bool,
    /// Its heartbeat on the bus is under 90 s old (by the bus's clock).
    pub online: bool,
    /// When it last showed life on the bus (`None`: never, as far as the bus remembers).
    pub last_seen: Option<Timestamp>,
    /// Its last signed status (`None`: none seen yet).
    pub status: Option<MachineStatus>,
}

/// One machine's compact status, as it goes on the bus (signed with the fleet key): no paths,
/// payloads, prompts or tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineStatus {
    pub machine: String,
    /// The wakebridge version it runs.
    pub version: String,
    /// When it was made, by that machine's clock.
    pub at: Timestamp,
    pub sessions: Vec<FleetSession>,
    #[serde(default)]
    pub budgets: Vec<FleetBudget>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetSession {
    pub id: String,
    /// The last part of its working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub agent: String,
    pub state: SessionState,
    /// Context used, 0-100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<f64>,
    /// Bus events it is owed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_reset: Option<Timestamp>,
    /// The pause a person put it under, while it lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_nudge: Option<Timestamp>,
    /// Rewinds performed, where there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewinds: Option<u32>,
    /// When the message its inbox took went unheard, while it stays so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unheard_since: Option<Timestamp>,
}

/// An account's windows, named by the last part of its config directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetBudget {
    pub account: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub five_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub five_hour_resets: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seven_day: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seven_day_resets: Option<Timestamp>,
}

/// One Claude Code account's usage windows (subscribers; from the status line's `rate_limits`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Its config directory (`~/.claude`, or `CLAUDE_CONFIG_DIR`).
    pub account: String,
    /// The 5-hour window, while it runs (`None`: not reported, or its reset passed).
    pub five_hour: Option<BudgetWindow>,
    /// The 7-day window, likewise.
    pub seven_day: Option<BudgetWindow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetWindow {
    /// 0-100.
    pub used_percentage: f64,
    pub resets_at: Option<Timestamp>,
    /// When a status line last reported it.
    pub seen_at: Option<Timestamp>,
    /// No report for `[budget] stale_after`: the share may be higher by now.
    pub stale: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    pub session_id: String,
    /// The agent it runs (`claude`, `codex`), as its hooks named it.
    #[serde(default)]
    pub agent: Agent,
    pub pane: Option<Pane>,
    pub state: SessionState,
    /// Why the state is what it is, in a few words, for a person.
    pub reason: String,
    pub cooldown_remaining_s: f64,
    pub last_wake_at: Option<Timestamp>,
    pub last_action: Option<String>,
    pub last_delivery_at: Option<Timestamp>,
    pub last_error_kind: Option<String>,
    pub last_hook_event: Option<String>,
    pub last_seen_at: Option<Timestamp>,
    pub cwd: Option<String>,
    pub transcript_path: Option<String>,
    /// `None` for a spool too big to count (or when only sizes were asked for).
    pub spool_lines: Option<u64>,
    pub spool_bytes: u64,
    pub context: Option<Context>,
    pub nudge: Option<Nudge>,
    pub owed: Option<Owed>,
    pub paid: Option<Paid>,
    pub limit: Option<Limit>,
    pub rewind: Option<Rewind>,
    /// Its inbox, once a hook announced one or something was sent there.
    #[serde(default)]
    pub inbox: Option<Inbox>,
    /// The pause a person put it under, while it lasts.
    #[serde(default)]
    pub pause: Option<Pause>,
    /// Why wakebridge only watches it (no nudge, resume or rewind of its own; its context is
    /// followed and warned, its bus events delivered), while it does; `None`: kept.
    #[serde(default)]
    pub watched: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub since: Timestamp,
    /// `None`: until unpaused.
    pub until: Option<Timestamp>,
    /// Every session is paused (`--all`), not this one alone.
    pub all: bool,
}

/// A session's inbox (Claude Code 2.1.224+) and the newest message sent there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inbox {
    /// Whether a message can go there now (a private socket of ours, its process alive).
    pub live: bool,
    /// Why not, when not.
    pub problem: Option<String>,
    /// When the newest message to it was sent.
    pub last_sent_at: Option<Timestamp>,
    /// When the session's `UserPromptSubmit` hook reported that message (`None`: not yet).
    pub heard_at: Option<Timestamp>,
    /// When that message was sent, while it has gone unheard too long and is not held for a
    /// human (refused, dropped, or the session is stuck): wakes are typed meanwhile.
    #[serde(default)]
    pub unheard_since: Option<Timestamp>,
    /// Claude Code holds that message for a human to deliver or deny.
    #[serde(default)]
    pub held: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pane {
    /// `tmux` or `zellij`.
    pub mux: String,
    pub pane: String,
    /// The tmux session (when known) or the zellij session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// 0-100, one decimal; `None` until the session had a response.
    pub percent: Option<f64>,
    pub used_tokens: Option<u64>,
    pub context_window: u64,
    pub model: Option<String>,
    /// Where the window size came from.
    pub source: String,
    /// Where the usage came from (`transcript`, `statusline`).
    pub usage_source: Option<String>,
    pub transcript: Option<String>,
    pub updated_at: Option<Timestamp>,
    /// The warning level waiting for the session's next idle moment.
    pub pending_warning: Option<String>,
    pub last_warning: Option<String>,
    pub last_warning_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nudge {
    /// Nudges typed since the session last showed life.
    pub unanswered: u32,
    pub last_nudge_at: Option<Timestamp>,
    /// The earliest the next nudge may go, while one is scheduled.
    pub next_nudge_at: Option<Timestamp>,
    pub acknowledged: bool,
    /// Since when nothing moved, while the session looks idle.
    pub idle_since: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owed {
    pub events: u64,
    /// Arrival of the oldest.
    pub since: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paid {
    pub last_at: Timestamp,
    /// `hook` (the Stop hook's answer), `typed` or `inbox`.
    pub last_how: String,
    pub last_events: u64,
    pub by_hook: u64,
    pub by_typing: u64,
    #[serde(default)]
    pub by_inbox: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    /// As Claude Code names it: `5-hour limit`, `weekly limit`, ...
    pub kind: String,
    pub resets_at: Option<Timestamp>,
    /// The reset as Claude Code wrote it (`3pm (Europe/London)`).
    pub resets_text: Option<String>,
    /// `screen`, `transcript`, `hook` or `statusline`.
    pub seen_how: String,
    pub since: Timestamp,
    /// Resume messages typed for this limit.
    pub tries: u32,
    /// The resumes ran out: held until the session shows life.
    pub gave_up: bool,
    /// `resets 15:00, in 1h 12m`.
    pub shown: String,
}

/// The session's rewinds, counted across the ids it had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewind {
    pub performed: u32,
    pub last_at: Option<Timestamp>,
    /// `asked`, `auto` or `restart`.
    pub last_why: Option<String>,
    /// `done`, `not-typed`, `failed` or `skipped`.
    pub last_outcome: Option<String>,
    pub last_detail: Option<String>,
    /// The kind of a rewind asked for and not performed yet.
    pub waiting: Option<String>,
    /// The ids it had before, newest first: messages to them still reach it.
    pub formerly: Vec<String>,
    /// `rewound 2×, last 14:02`.
    pub shown: String,
}

/// The `action` vocabulary of `POST /hook`'s answers: what became of a delivered event, in the
/// reference bridge's words.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    EnumIter,
    strum::EnumString,
    strum::FromRepr,
    IntoStaticStr,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Action {
    Spool,
    Tmux,
    Zellij,
    SpoolUnmapped,
    SpoolBusy,
    SpoolCooldown,
    SpoolMuxFailed,
    /// Beyond the reference: the mapped pane no longer runs the session; nothing was typed.
    SpoolStalePane,
    /// Beyond the reference: a person paused the session (`wakebridge pause`); owed until
    /// unpaused.
    SpoolPaused,
    /// Beyond the reference: the session's own inbox took the wake (Claude Code 2.1.224+);
    /// nothing was typed, and no pane is needed.
    Inbox,
}

crate::strum_as_str!(Action);

impl Action {
    pub fn woke(self) -> bool {
        matches!(self, Action::Tmux | Action::Zellij | Action::Inbox)
    }

    /// Whether a bus event answered so is owed a wake: its pane is known but the wake was not
    /// typed. Not `spool-unmapped`: other machines' sessions arrive so.
    pub fn owes(self) -> bool {
        matches!(
            self,
            Action::SpoolBusy
                | Action::SpoolCooldown
                | Action::SpoolMuxFailed
                | Action::SpoolStalePane
                | Action::SpoolPaused
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn states_are_kebab_case_the_same_way_for_serde_and_labels() {
        for state in SessionState::iter() {
            let json = serde_json::to_value(state).unwrap();
            assert_eq!(json, state.as_str(), "{state:?}");
            let back: SessionState = serde_json::from_value(json).unwrap();
            assert_eq!(back, state);
        }
        assert_eq!(SessionState::AcknowledgedIdle.as_str(), "acknowledged-idle");
        assert_eq!(SessionState::NoPane.as_str(), "no-pane");
    }

    #[test]
    fn health_hides_what_a_reader_may_not_see_and_shows_null_where_it_may() {
        let health = Health {
            status: "ok".into(),
            service: "wakebridge".into(),
            version: "1".into(),
            pid: 7,
            started_at: Timestamp::UNIX_EPOCH,
            config_file: Shown::Hidden,
            bus_url: None,
            backend: None,
            registered: None,
            webhook_id: Shown::Hidden,
            last_verified_at: Shown::Hidden,
            fleet: None,
        };
        let body = serde_json::to_value(&health).unwrap();
        assert!(body.get("config_file").is_none() && body.get("registered").is_none());
        let shown = Health {
            config_file: Shown::Value(None),
            ..health
        };
        let body = serde_json::to_value(&shown).unwrap();
        assert!(body["config_file"].is_null() && body.get("config_file").is_some());
        let back: Health = serde_json::from_value(body).unwrap();
        assert_eq!(back, shown);
        let id = serde_json::to_value(Shown::Value(Some(7))).unwrap();
        assert_eq!(id, serde_json::Value::from(7));
    }

    #[test]
    fn only_a_delivered_wake_woke_the_session() {
        // The context monitor settles a warning only on an action that woke the session.
        assert!(Action::Tmux.woke());
        assert!(Action::Zellij.woke());
        assert!(Action::Inbox.woke());
        for a in [
            Action::SpoolBusy,
            Action::SpoolCooldown,
            Action::SpoolMuxFailed,
            Action::SpoolStalePane,
            Action::SpoolUnmapped,
        ] {
            assert!(!a.woke(), "{a:?}");
        }
    }
}
