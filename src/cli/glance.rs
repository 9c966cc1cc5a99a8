//! `wakebridge status` as one glance: what `/sessions` and `/health` say, rendered for a person
//! (short ids, the project and tmux session, one state word, a context bar, relative times, the
//! next nudge or resume) within a given width. Pure: the sessions, the health answer, the clock
//! and the width in, a `String` out; the verb's HTTP and terminal handling live in `client.rs`.
//! It decides what "ended" means for the view (`ended`) and which sessions a view shows.

use std::cmp::Reverse;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::Value;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::claude::hooks::HookKind;
use crate::http::status::SessionStatus;

/// The width the table is laid out for when the terminal's is not known (a pipe, a file): a
/// glance must fit a split terminal or a narrow window without wrapping.
pub const DEFAULT_WIDTH: usize = 100;

/// Fewest characters of a session id shown: Claude Code's ids are UUIDs, whose first block is
/// 8 hex digits; fewer would collide often among a handful of sessions and read like noise.
pub const MIN_ID_CHARS: usize = 8;

/// An unmapped session with no trace (hook, delivery, wake) for this long is ended even without
/// a `SessionEnd`: an agent killed with its pane (or a bus-only id) fires no hook, and a day
/// without a single event means nobody is working there (the nudger polls idle ones every few
/// minutes, a working one fires hooks every tool call).
pub const QUIET_ENDED_AFTER: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// How long an ended session stays in the default view: long enough to notice that an agent
/// stopped (and why), short enough that yesterday's sessions do not crowd today's. `--all`
/// shows every ended one.
pub const ENDED_SHOWN_FOR: std::time::Duration = std::time::Duration::from_secs(3600);

/// Cells in the context bar: eight steps of 12.5 % each are enough to see "nearly full".
const BAR_CELLS: usize = 8;

/// Columns between two cells.
const GAP: usize = 2;

/// A view's settings: when it is, how wide, which sessions, how to show a clock.
#[derive(Debug, Clone)]
pub struct View {
    pub now: Timestamp,
    pub width: usize,
    /// Every ended session too (`--all`).
    pub all: bool,
    /// ANSI colour on the state column (a terminal).
    pub color: bool,
    /// The zone clock times (a limit's reset) are shown in.
    pub tz: TimeZone,
}

/// One session's state as a person reads it, most pressing first.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// `SessionEnd` seen (and unmapped), or unmapped and quiet for [`QUIET_ENDED_AFTER`].
    Ended,
    /// Not mapped in panes.json: its events are spooled only.
    NoPane,
    /// Held at a usage limit until its reset.
    Limited {
        until: Option<Timestamp>,
        gave_up: bool,
    },
    /// A permission prompt or another dialog waits for a human.
    Dialog,
    /// Text sits at the prompt (a human's draft): nothing is typed over it.
    Draft,
    /// Bus events wait for a wake.
    Owed(u64),
    /// A turn runs.
    Working,
    /// The nudger has given up on it until it shows activity.
    Acknowledged,
    Idle,
}

impl State {
    fn label(&self, view: &View) -> String {
        match self {
            State::Ended => "ended".into(),
            State::NoPane => "no pane".into(),
            State::Limited { gave_up: true, .. } => "limited, gave up".into(),
            State::Limited {
                until: Some(at), ..
            } => format!("limited until {}", clock(*at, view)),
            State::Limited { until: None, .. } => "limited".into(),
            State::Dialog => "waiting on a dialog".into(),
            State::Draft => "draft at the prompt".into(),
            State::Owed(n) => format!("owed {n}"),
            State::Working => "working".into(),
            State::Acknowledged => "acknowledged idle".into(),
            State::Idle => "idle".into(),
        }
    }

    /// The ANSI colour of its label.
    fn colour(&self) -> &'static str {
        match self {
            State::Working => "33",
            State::Idle | State::Acknowledged => "32",
            State::Dialog | State::Draft | State::Owed(_) => "35",
            State::Limited { .. } => "31",
            State::Ended | State::NoPane => "2",
        }
    }
}

fn parse_time(value: Option<&str>) -> Option<Timestamp> {
    value?.parse().ok()
}

fn json_time(value: &Value) -> Option<Timestamp> {
    parse_time(value.as_str())
}

/// The latest sign of life the ledger recorded: a hook, a delivery, a wake, a payment, a rewind.
pub fn last_activity(s: &SessionStatus) -> Option<Timestamp> {
    let mut times = vec![
        parse_time(s.last_seen_at.as_deref()),
        parse_time(s.last_delivery_at.as_deref()),
        parse_time(s.last_wake_at.as_deref()),
    ];
    if let Some(paid) = &s.paid {
        times.push(json_time(&paid["last_at"]));
    }
    if let Some(rewind) = &s.rewind {
        times.push(json_time(&rewind["last_at"]));
    }
    times.into_iter().flatten().max()
}

/// Whether the session is over as far as the view can tell: it has no pane, owes nothing, and
/// either said so (`SessionEnd`) or has been quiet for [`QUIET_ENDED_AFTER`].
pub fn ended(s: &SessionStatus, now: Timestamp) -> bool {
    if s.pane.is_some() || s.owed.is_some() {
        return false;
    }
    let said_so = s
        .last_hook_event
        .as_deref()
        .is_some_and(|e| HookKind::of_recorded(e) == HookKind::Ended);
    said_so || older_than(last_activity(s), now, QUIET_ENDED_AFTER)
}

/// True when `at` is unknown or more than `age` before `now`.
fn older_than(at: Option<Timestamp>, now: Timestamp, age: std::time::Duration) -> bool {
    let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
    at.is_none_or(|at| now.as_millisecond().saturating_sub(at.as_millisecond()) > age_ms)
}

/// The session's state, from what `/sessions` says (see [`State`] for the order).
pub fn state(s: &SessionStatus, now: Timestamp) -> State {
    if ended(s, now) {
        return State::Ended;
    }
    if s.pane.is_none() {
        return State::NoPane;
    }
    if let Some(limit) = &s.limit {
        return State::Limited {
            until: json_time(&limit["resets_at"]),
            gave_up: limit["gave_up"].as_bool() == Some(true),
        };
    }
    let nudge_reason = s
        .nudge
        .as_ref()
        .and_then(|n| n["last_reason"].as_str())
        .unwrap_or_default();
    // A permission prompt fires a Notification hook while the turn's busy marker stands; the
    // next tool call's hook replaces it once answered.
    let dialog_hook = s
        .last_hook_event
        .as_deref()
        .is_some_and(|e| HookKind::of_recorded(e) == HookKind::Waiting);
    if dialog_hook
        || (nudge_reason.starts_with("blocked (")
            && (nudge_reason.contains("dialog") || nudge_reason.contains("waiting")))
    {
        return State::Dialog;
    }
    if nudge_reason.starts_with("blocked (text typed") {
        return State::Draft;
    }
    if let Some(events) = s.owed.as_ref().and_then(|o| o["events"].as_u64()) {
        return State::Owed(events);
    }
    if s.state == "busy"
        || nudge_reason.starts_with("busy (")
        || nudge_reason.starts_with("active (")
    {
        return State::Working;
    }
    if s.nudge.as_ref().and_then(|n| n["acknowledged"].as_bool()) == Some(true) {
        return State::Acknowledged;
    }
    State::Idle
}

/// `3m ago`, `in 2h`, `now`: the distance from `now` in at most two units.
pub fn relative(at: Timestamp, now: Timestamp) -> String {
    let ms = at.as_millisecond().saturating_sub(now.as_millisecond());
    let secs = (ms.unsigned_abs() + 500) / 1000;
    if secs < 1 {
        return "now".into();
    }
    let span = span(secs);
    if ms < 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// `45s`, `12m`, `3h 5m`, `2d 4h`: the second unit only while it still matters.
fn span(secs: u64) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    match secs {
        s if s < MINUTE => format!("{s}s"),
        s if s < HOUR => format!("{}m", s / MINUTE),
        s if s < DAY => match (s / HOUR, s % HOUR / MINUTE) {
            (h, 0) | (h @ 10.., _) => format!("{h}h"),
            (h, m) => format!("{h}h {m}m"),
        },
        s => match (s / DAY, s % DAY / HOUR) {
            (d, 0) | (d @ 10.., _) => format!("{d}d"),
            (d, h) => format!("{d}d {h}h"),
        },
    }
}

/// `15:00` within a day of now, else `Dec 03 15:00`.
fn clock(at: Timestamp, view: &View) -> String {
    let zoned = at.to_zoned_datetime(view.tz.clone());
    let within_day = (at.as_millisecond() - view.now.as_millisecond()).abs() < 24 * 3600 * 1000;
    let format = if within_day { "%H:%M" } else { "%b %d %H:%M" };
    zoned.strftime(format).to_string()
}

/// For each id in `ids`, the shortest prefix of at least [`MIN_ID_CHARS`] characters that no
/// other id in `among` shares (the whole id when it is shorter).
pub fn short_ids<'a>(ids: &[&'a str], among: &[&str]) -> Vec<&'a str> {
    ids.iter()
        .map(|id| {
            let common = among
                .iter()
                .filter(|other| *other != id)
                .map(|other| {
                    id.chars()
                        .zip(other.chars())
                        .take_while(|(a, b)| a == b)
                        .count()
                })
                .max()
                .unwrap_or(0);
            let chars = (common + 1).max(MIN_ID_CHARS);
            match id.char_indices().nth(chars) {
                Some((at, _)) => &id[..at],
                None => id,
            }
        })
        .collect()
}

/// Every id a user may name a session by: the ids `/sessions` lists and the ones they had
/// before a `/clear` (`rewind.formerly`).
pub fn known_ids(sessions: &[SessionStatus]) -> Vec<&str> {
    let mut ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    for s in sessions {
        if let Some(formerly) = s.rewind.as_ref().and_then(|r| r["formerly"].as_array()) {
            ids.extend(formerly.iter().filter_map(Value::as_str));
        }
    }
    ids
}

/// `text` cut to `width` columns, with an ellipsis where something was cut.
pub fn cut(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('\u{2026}');
    }
    out
}

/// `text` cut to `width` and padded with spaces to exactly `width` columns.
fn fit(text: &str, width: usize) -> String {
    let mut out = cut(text, width);
    let pad = width.saturating_sub(out.width());
    out.extend(std::iter::repeat_n(' ', pad));
    out
}

/// `█████░░░ 62%`.
fn bar(percent: f64) -> String {
    let clamped = percent.clamp(0.0, 100.0);
    let filled = ((clamped / 100.0) * BAR_CELLS as f64).round() as usize;
    let mut out: String = std::iter::repeat_n('\u{2588}', filled).collect();
    out.extend(std::iter::repeat_n(
        '\u{2591}',
        BAR_CELLS - filled.min(BAR_CELLS),
    ));
    format!("{out} {percent:.0}%")
}

/// The cwd's last component (`/work/wakebridge` → `wakebridge`).
fn project(s: &SessionStatus) -> String {
    let Some(cwd) = s.cwd.as_deref() else {
        return "-".into();
    };
    let trimmed = cwd.trim_end_matches('/');
    match trimmed.rsplit('/').next() {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => cwd.to_owned(),
    }
}

/// The tmux (or zellij) session the pane is in, else the pane's id.
fn mux_session(s: &SessionStatus) -> String {
    let Some(pane) = &s.pane else {
        return "-".into();
    };
    let name = pane["session"].as_str().filter(|n| !n.is_empty());
    match (pane["mux"].as_str(), name, pane["pane"].as_str()) {
        (Some("zellij"), Some(session), _) => format!("zellij:{session}"),
        (_, Some(session), _) => session.to_owned(),
        (_, None, Some(pane)) => pane.to_owned(),
        _ => "?".into(),
    }
}

/// What happens next: a resume at a limit's reset, a waiting rewind, an owed wake, a nudge.
fn next(s: &SessionStatus, state: &State, view: &View) -> String {
    match state {
        State::Ended | State::NoPane => return "-".into(),
        State::Limited { gave_up: true, .. } => return "waits for activity".into(),
        State::Limited {
            until: Some(at), ..
        } => return format!("resume {}", relative(*at, view.now)),
        _ => {}
    }
    if let Some(why) = s.rewind.as_ref().and_then(|r| r["waiting"].as_str()) {
        return match why {
            "restart" => "restart waiting".into(),
            _ => "rewind waiting".into(),
        };
    }
    match state {
        State::Owed(_) if s.state == "busy" => return "wake at turn end".into(),
        State::Owed(_) => return "wake when idle".into(),
        _ => {}
    }
    let nudge_at = s
        .nudge
        .as_ref()
        .and_then(|n| n["next_nudge_at_ms"].as_i64())
        .and_then(|ms| Timestamp::from_millisecond(ms).ok());
    match nudge_at {
        Some(at) if at <= view.now => "nudge due".into(),
        Some(at) => format!("nudge {}", relative(at, view.now)),
        None => "-".into(),
    }
}

/// The header: the daemon's version and pid, its uptime and whether it is registered with the
/// bus, and how many sessions the view shows.
fn header(health: Option<&Value>, view: &View, shown: usize, hidden: usize) -> String {
    let mut parts = Vec::new();
    match health {
        Some(h) => {
            parts.push(format!(
                "wakebridge {}",
                h["version"].as_str().unwrap_or("?")
            ));
            if let Some(pid) = h["pid"].as_u64() {
                parts.push(format!("pid {pid}"));
            }
            if let Some(started) = json_time(&h["started_at"]) {
                let up = view
                    .now
                    .as_millisecond()
                    .saturating_sub(started.as_millisecond());
                parts.push(format!(
                    "up {}",
                    span(u64::try_from(up / 1000).unwrap_or(0))
                ));
            }
            parts.push(
                match h["registered"].as_bool() {
                    Some(true) => "bus: registered",
                    Some(false) => "bus: not registered",
                    None => "bus: registration off",
                }
                .into(),
            );
        }
        None => parts.push("wakebridge (no /health answer)".into()),
    }
    let mut count = format!("{shown} session{}", if shown == 1 { "" } else { "s" });
    if hidden > 0 {
        count.push_str(&format!(", {hidden} ended hidden (--all)"));
    }
    parts.push(count);
    parts.join(" \u{b7} ")
}

/// The sessions a view shows, in the order it shows them: live ones by id, then ended ones
/// (only those that ended within [`ENDED_SHOWN_FOR`] unless `all`), most recent first.
pub fn shown<'a>(
    sessions: &'a [SessionStatus],
    view: &View,
) -> (Vec<(&'a SessionStatus, State)>, usize) {
    let mut live = Vec::new();
    let mut over = Vec::new();
    let mut hidden = 0;
    for s in sessions {
        let state = state(s, view.now);
        if state != State::Ended {
            live.push((s, state));
        } else if view.all || !older_than(last_activity(s), view.now, ENDED_SHOWN_FOR) {
            over.push((s, state));
        } else {
            hidden += 1;
        }
    }
    live.sort_by(|a, b| a.0.session_id.cmp(&b.0.session_id));
    over.sort_by_key(|(s, _)| Reverse(last_activity(s)));
    live.extend(over);
    (live, hidden)
}

/// Columns: header, widest it may grow to, narrowest it may be squeezed to, and when: the
/// names (project, tmux session) and the next step give way first, the state and the context
/// (what a glance is for) last.
const COLUMNS: [(&str, usize, usize, u8); 7] = [
    ("SESSION", 20, MIN_ID_CHARS, 1),
    ("PROJECT", 18, 6, 0),
    ("TMUX", 12, 4, 0),
    ("STATE", 22, 8, 1),
    ("CONTEXT", 13, 4, 1),
    ("ACTIVE", 10, 6, 1),
    ("NEXT", 24, 6, 0),
];

/// The whole glance: a header line, then one line per shown session, every line at most
/// `view.width` columns wide (display width); nothing wraps, long cells end in `…`.
pub fn render(sessions: &[SessionStatus], health: Option<&Value>, view: &View) -> String {
    let (rows, hidden) = shown(sessions, view);
    let mut out = cut(&header(health, view, rows.len(), hidden), view.width);
    out.push('\n');
    if rows.is_empty() {
        let text = if hidden > 0 {
            "no live sessions; `wakebridge status --all` shows the ended ones"
        } else {
            "no sessions known yet (none mapped in panes.json, none seen by `wakebridge hook`)"
        };
        out.push_str(&cut(text, view.width));
        out.push('\n');
        return out;
    }
    let ids: Vec<&str> = rows.iter().map(|(s, _)| s.session_id.as_str()).collect();
    let short = short_ids(&ids, &known_ids(sessions));
    let cells: Vec<[String; 7]> = rows
        .iter()
        .zip(&short)
        .map(|((s, state), id)| {
            let context = s
                .context
                .as_ref()
                .and_then(|c| c["percent"].as_f64())
                .map_or("-".into(), bar);
            let active = last_activity(s).map_or("-".into(), |at| relative(at, view.now));
            [
                (*id).to_owned(),
                project(s),
                mux_session(s),
                state.label(view),
                context,
                active,
                next(s, state, view),
            ]
        })
        .collect();
    let widths = widths(&cells, view.width);
    let head = COLUMNS.map(|(name, ..)| name.to_owned());
    out.push_str(&line(&head, &widths, view, None));
    for (row, (_, state)) in cells.iter().zip(&rows) {
        out.push_str(&line(row, &widths, view, Some(state)));
    }
    out
}

/// Each column's width: as wide as its widest cell (within its cap), then the widest ones
/// squeezed a column at a time until the line fits `width`.
fn widths(cells: &[[String; 7]], width: usize) -> [usize; 7] {
    let mut widths = [0; 7];
    for (c, (name, cap, ..)) in COLUMNS.iter().enumerate() {
        let widest = cells.iter().map(|r| r[c].width()).max().unwrap_or(0);
        widths[c] = widest.max(name.width()).min(*cap);
    }
    let total = |w: &[usize; 7]| w.iter().sum::<usize>() + GAP * (w.len() - 1);
    while total(&widths) > width {
        let squeezable = (0..widths.len())
            .filter(|&c| widths[c] > COLUMNS[c].2)
            .max_by_key(|&c| (Reverse(COLUMNS[c].3), widths[c] - COLUMNS[c].2, c));
        match squeezable {
            Some(c) => widths[c] -= 1,
            None => break,
        }
    }
    widths
}

fn line(cells: &[String; 7], widths: &[usize; 7], view: &View, state: Option<&State>) -> String {
    let mut parts = Vec::new();
    for (c, (cell, width)) in cells.iter().zip(widths).enumerate() {
        let padded = if c + 1 == cells.len() {
            cut(cell, *width)
        } else {
            fit(cell, *width)
        };
        parts.push(padded);
    }
    // Past the narrowest layout (a tiny terminal), the line itself is cut.
    let mut text = cut(parts.join(&" ".repeat(GAP)).trim_end(), view.width);
    if let (true, Some(state)) = (view.color, state) {
        // Colour the state cell after the layout: escapes take no columns.
        let start: usize = widths[..3].iter().sum::<usize>() + 3 * GAP;
        if let Some(at) = byte_at(&text, start) {
            let end = byte_at(&text, start + widths[3]).unwrap_or(text.len());
            text = format!(
                "{}\x1b[{}m{}\x1b[0m{}",
                &text[..at],
                state.colour(),
                &text[at..end],
                &text[end..]
            );
        }
    }
    text.push('\n');
    text
}

/// The byte offset where display column `column` starts in `text`, if it is inside it.
fn byte_at(text: &str, column: usize) -> Option<usize> {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        if used >= column {
            return Some(at);
        }
        used += c.width().unwrap_or(0);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 2026-12-01T12:00:00Z, the fixture's "now".
    const NOW_S: i64 = 1_796_126_400;

    fn now() -> Timestamp {
        Timestamp::from_second(NOW_S).unwrap()
    }

    /// `secs` from now as `/sessions` writes times.
    fn at(secs: i64) -> String {
        Timestamp::from_second(NOW_S + secs).unwrap().to_string()
    }

    fn view(width: usize) -> View {
        View {
            now: now(),
            width,
            all: false,
            color: false,
            tz: TimeZone::UTC,
        }
    }

    /// A mapped, idle session seen a minute ago.
    fn session(id: &str) -> SessionStatus {
        SessionStatus {
            session_id: id.into(),
            pane: Some(json!({"mux": "tmux", "pane": "%3", "session": "agents"})),
            state: "idle".into(),
            reason: String::new(),
            cooldown_remaining_s: 0.0,
            last_wake_at: None,
            last_action: None,
            last_delivery_at: None,
            last_error_kind: None,
            last_hook_event: Some("Stop".into()),
            last_seen_at: Some(at(-60)),
            cwd: Some("/home/me/src/wakebridge".into()),
            transcript_path: None,
            spool_lines: Some(0),
            spool_bytes: 0,
            context: None,
            nudge: None,
            owed: None,
            paid: None,
            limit: None,
            rewind: None,
        }
    }

    /// One session in every state the glance tells apart, each with an id of its own.
    fn fixture() -> Vec<SessionStatus> {
        let mut working = session("a1b2c3d4-0000-4000-8000-000000000001");
        working.state = "busy".into();
        working.last_hook_event = Some("UserPromptSubmit".into());
        working.last_seen_at = Some(at(-5));
        working.context = Some(json!({"percent": 62.4}));
        let mut idle = session("a1b2ffee-0000-4000-8000-000000000002");
        idle.nudge = Some(json!({"unanswered": 1, "acknowledged": false,
            "next_nudge_at_ms": (NOW_S + 240) * 1000, "last_reason": "idle (hook: turn ended), backing off"}));
        idle.context = Some(json!({"percent": 100.0}));
        let mut dialog = session("b0000000-0000-4000-8000-000000000003");
        dialog.state = "busy".into();
        dialog.last_hook_event = Some("Notification:permission_prompt".into());
        let mut draft = session("b1000000-0000-4000-8000-000000000004");
        draft.nudge = Some(json!({"unanswered": 0, "acknowledged": false,
            "last_reason": "blocked (text typed at the prompt)"}));
        let mut limited = session("c0000000-0000-4000-8000-000000000005");
        limited.limit = Some(json!({"resets_at": at(2 * 3600), "gave_up": false,
            "shown": "resets 14:00, in 2h"}));
        let mut gave_up = session("c1000000-0000-4000-8000-000000000006");
        gave_up.limit = Some(json!({"resets_at": at(-600), "gave_up": true}));
        let mut owed = session("d0000000-0000-4000-8000-000000000007");
        owed.owed = Some(json!({"events": 3, "since": at(-120)}));
        let mut acknowledged = session("d1000000-0000-4000-8000-000000000008");
        acknowledged.nudge = Some(json!({"unanswered": 5, "acknowledged": true,
            "last_reason": "acknowledged idle"}));
        let mut no_pane = session("e0000000-0000-4000-8000-000000000009");
        no_pane.pane = None;
        no_pane.cwd = None;
        no_pane.last_hook_event = None;
        no_pane.last_seen_at = None;
        no_pane.last_delivery_at = Some(at(-30));
        let mut just_ended = session("f0000000-0000-4000-8000-00000000000a");
        just_ended.pane = None;
        just_ended.last_hook_event = Some("SessionEnd".into());
        just_ended.last_seen_at = Some(at(-300));
        let mut long_ended = session("f1000000-0000-4000-8000-00000000000b");
        long_ended.pane = None;
        long_ended.last_hook_event = Some("SessionEnd".into());
        long_ended.last_seen_at = Some(at(-3 * 3600));
        let mut gone_quiet = session("f2000000-0000-4000-8000-00000000000c");
        gone_quiet.pane = None;
        gone_quiet.last_hook_event = Some("Stop".into());
        gone_quiet.last_seen_at = Some(at(-2 * 86_400));
        let mut rewinding = session("a9000000-0000-4000-8000-00000000000d");
        rewinding.rewind = Some(json!({"waiting": "asked", "formerly": ["99999999-old"]}));
        vec![
            working,
            idle,
            dialog,
            draft,
            limited,
            gave_up,
            owed,
            acknowledged,
            no_pane,
            just_ended,
            long_ended,
            gone_quiet,
            rewinding,
        ]
    }

    fn line_of<'a>(text: &'a str, id_prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(id_prefix))
            .unwrap_or_else(|| panic!("no line for {id_prefix} in\n{text}"))
    }

    #[test]
    fn every_state_reads_as_a_person_would_say_it() {
        let text = render(&fixture(), None, &view(DEFAULT_WIDTH));
        let cases = [
            ("a1b2c3d4 ", "working"),
            ("a1b2ffee ", "idle"),
            ("b0000000 ", "waiting on a dialog"),
            ("b1000000 ", "draft at the prompt"),
            ("c0000000 ", "limited until 14:00"),
            ("c1000000 ", "limited, gave up"),
            ("d0000000 ", "owed 3"),
            ("d1000000 ", "acknowledged idle"),
            ("e0000000 ", "no pane"),
            ("f0000000 ", "ended"),
            ("a9000000 ", "idle"),
        ];
        for (id, state) in cases {
            let line = line_of(&text, id);
            assert!(line.contains(&format!("  {state}  ")), "{id}: {line}");
        }
        assert!(line_of(&text, "a1b2c3d4 ").contains("wakebridge  agents"));
        assert!(
            line_of(&text, "a1b2c3d4 ")
                .contains("\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}\u{2591}\u{2591}\u{2591} 62%")
        );
        assert!(
            line_of(&text, "a1b2ffee ")
                .contains("\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}\u{2588} 100%")
        );
        assert!(
            line_of(&text, "a1b2ffee ").ends_with("1m ago   nudge in 4m"),
            "{text}"
        );
        assert!(
            line_of(&text, "c0000000 ").ends_with("resume in 2h"),
            "{text}"
        );
        assert!(line_of(&text, "c1000000 ").ends_with("waits for activity"));
        assert!(line_of(&text, "d0000000 ").ends_with("wake when idle"));
        assert!(line_of(&text, "a9000000 ").ends_with("rewind waiting"));
        assert!(line_of(&text, "e0000000 ").contains("30s ago"));
        assert!(line_of(&text, "f0000000 ").contains("5m ago"));
    }

    #[test]
    fn ended_sessions_age_out_of_the_default_view_and_all_shows_them() {
        let sessions = fixture();
        let text = render(&sessions, None, &view(DEFAULT_WIDTH));
        assert!(
            text.contains("f0000000"),
            "ended 5 minutes ago stays:\n{text}"
        );
        assert!(
            !text.contains("f1000000") && !text.contains("f2000000"),
            "{text}"
        );
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with("11 sessions, 2 ended hidden (--all)")
        );
        let all = render(
            &sessions,
            None,
            &View {
                all: true,
                ..view(DEFAULT_WIDTH)
            },
        );
        assert!(line_of(&all, "f1000000 ").contains("  ended  "), "{all}");
        assert!(
            line_of(&all, "f2000000 ").contains("  ended  "),
            "quiet for 2 days: {all}"
        );
        // Live sessions first, then ended ones, most recent first.
        let order: Vec<&str> = all.lines().skip(2).map(|l| &l[..8]).collect();
        assert_eq!(
            &order[order.len() - 3..],
            ["f0000000", "f1000000", "f2000000"]
        );
        assert!(all.lines().next().unwrap().ends_with("13 sessions"));
        // An unmapped session with owed events or recent activity is not over.
        assert!(!ended(&sessions[8], now()));
        let mut owed_unmapped = sessions[12].clone();
        owed_unmapped.pane = None;
        owed_unmapped.last_seen_at = Some(at(-3 * 86_400));
        owed_unmapped.owed = Some(json!({"events": 1}));
        assert!(!ended(&owed_unmapped, now()));
    }

    #[test]
    fn every_line_fits_the_width_in_display_columns() {
        let mut sessions = fixture();
        sessions[0].cwd = Some("/srv/a-project-with-a-very-long-name-indeed-and-more".into());
        sessions[1].cwd = Some("/srv/\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{30d7}\u{30ed}\u{30b8}\u{30a7}\u{30af}\u{30c8}\u{540d}\u{524d}".into());
        sessions[2].pane = Some(
            json!({"mux": "tmux", "pane": "%1", "session": "a-tmux-session-name-that-goes-on"}),
        );
        let health = json!({"version": "0.1.0", "pid": 4242, "started_at": at(-3 * 3600 - 720),
            "registered": true});
        for width in [DEFAULT_WIDTH, 80, 60, 40, 20] {
            for all in [false, true] {
                let text = render(&sessions, Some(&health), &View { all, ..view(width) });
                for line in text.lines() {
                    assert!(line.width() <= width, "{} > {width}: {line}", line.width());
                }
            }
        }
        let text = render(&sessions, Some(&health), &view(DEFAULT_WIDTH));
        // The names give way first; the state column keeps its longest label.
        assert!(
            line_of(&text, "a1b2c3d4 ").contains("  a-project-with\u{2026}  "),
            "{text}"
        );
        assert!(
            line_of(&text, "b0000000 ").contains("  a-tmux-sess\u{2026}  waiting on a dialog  "),
            "{text}"
        );
        assert_eq!(
            text.lines().next().unwrap(),
            "wakebridge 0.1.0 \u{b7} pid 4242 \u{b7} up 3h 12m \u{b7} bus: registered \u{b7} 11 sessions, 2 ended hidden (--all)"
        );
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "SESSION   PROJECT          TMUX          STATE                CONTEXT        ACTIVE   NEXT"
        );
    }

    #[test]
    fn colour_goes_on_the_state_cell_only() {
        let text = render(
            &fixture(),
            None,
            &View {
                color: true,
                ..view(DEFAULT_WIDTH)
            },
        );
        let line = line_of(&text, "a1b2c3d4 ");
        assert!(line.contains("\x1b[33mworking"), "{line:?}");
        assert!(!text.lines().nth(1).unwrap().contains('\x1b'));
        let plain = render(&fixture(), None, &view(DEFAULT_WIDTH));
        assert!(!plain.contains('\x1b'));
    }

    #[test]
    fn relative_times_in_at_most_two_units() {
        let t = |secs| relative(Timestamp::from_second(NOW_S + secs).unwrap(), now());
        assert_eq!(t(0), "now");
        assert_eq!(t(-45), "45s ago");
        assert_eq!(t(-180), "3m ago");
        assert_eq!(t(7200), "in 2h");
        assert_eq!(t(3 * 3600 + 5 * 60), "in 3h 5m");
        assert_eq!(t(-(11 * 3600 + 5 * 60)), "11h ago");
        assert_eq!(t(-(2 * 86_400 + 4 * 3600)), "2d 4h ago");
        assert_eq!(t(-(12 * 86_400)), "12d ago");
    }

    #[test]
    fn ids_shortened_to_the_shortest_unique_prefix_of_eight_or_more() {
        let among = [
            "a1b2c3d4-0000",
            "a1b2c3d4-1111",
            "ffff0000-2222",
            "short",
            "a1b2c3d4-0000-x",
        ];
        assert_eq!(
            short_ids(&among, &among),
            [
                "a1b2c3d4-0000",
                "a1b2c3d4-1",
                "ffff0000",
                "short",
                "a1b2c3d4-0000-"
            ]
        );
        // An id given up at a /clear counts: typing the prefix must not be ambiguous.
        let text = render(&fixture(), None, &view(DEFAULT_WIDTH));
        assert!(text.contains("a9000000  "), "{text}");
        let sessions = fixture();
        assert!(known_ids(&sessions).contains(&"99999999-old"));
    }

    #[test]
    fn cuts_end_in_an_ellipsis_within_the_width() {
        assert_eq!(cut("wakebridge", 20), "wakebridge");
        assert_eq!(cut("wakebridge", 5), "wake\u{2026}");
        assert_eq!(cut("\u{65e5}\u{672c}\u{8a9e}", 4), "\u{65e5}\u{2026}");
        assert_eq!(cut("abc", 0), "");
    }

    #[test]
    fn an_empty_view_says_why() {
        assert!(render(&[], None, &view(DEFAULT_WIDTH)).contains("no sessions known yet"));
        let mut old = session("f1000000-0000-4000-8000-00000000000b");
        old.pane = None;
        old.last_hook_event = Some("SessionEnd".into());
        old.last_seen_at = Some(at(-3 * 3600));
        let text = render(&[old], None, &view(DEFAULT_WIDTH));
        assert!(
            text.contains("no live sessions; `wakebridge status --all`"),
            "{text}"
        );
        assert!(
            text.starts_with("wakebridge (no /health answer) \u{b7} 0 sessions, 1 ended hidden")
        );
    }
}
