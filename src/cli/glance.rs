//! `wakebridge status` as one glance: `/sessions` and `/health` rendered for a person within a
//! given width. Pure: sessions, health, clock and width in, a `String` out. The daemon decides
//! each session's state; this decides only which sessions a view shows and how to say it.

use std::cmp::Reverse;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::agent::Agent;
use crate::api::{Budget, Health, SessionState, SessionStatus, Sessions, Today};

/// The width laid out for when the terminal's is not known (a pipe, a file).
pub const DEFAULT_WIDTH: usize = 100;
/// Fewest characters of a session id shown: a UUID's first block.
pub const MIN_ID_CHARS: usize = 8;
/// How long an ended session stays in the default view (`--all` shows every one).
pub const ENDED_SHOWN_FOR: jiff::SignedDuration = jiff::SignedDuration::from_secs(3600);
const BAR_CELLS: usize = 8;
/// Columns between two cells.
const GAP: usize = 2;

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

/// The state column: the daemon's state in a person's words, with the detail that matters.
fn label(s: &SessionStatus, view: &View) -> String {
    let limit = s.limit.as_ref();
    match s.state {
        SessionState::Limited if limit.is_some_and(|l| l.gave_up) => "limited, gave up".into(),
        SessionState::Limited => until("limited", limit.and_then(|l| l.resets_at), view),
        SessionState::Paused => until("paused", s.pause.as_ref().and_then(|p| p.until), view),
        SessionState::Dialog => "waiting on a dialog".into(),
        SessionState::Draft => "draft at the prompt".into(),
        SessionState::Owed => format!("owed {}", s.owed.as_ref().map_or(0, |o| o.events)),
        state => state.as_str().replace('-', " "),
    }
}

pub(super) fn colour(state: SessionState) -> &'static str {
    use SessionState::*;
    match state {
        Working => "33",
        Idle | Nudged | AcknowledgedIdle => "32",
        Dialog | Draft | Owed | Rewinding | Paused => "35",
        Limited => "31",
        Ended | NoPane => "2",
    }
}

/// The latest sign of life the ledger recorded: a hook, a delivery, a wake, a payment, a rewind.
fn last_activity(s: &SessionStatus) -> Option<Timestamp> {
    let paid = s.paid.as_ref().map(|p| p.last_at);
    let rewound = s.rewind.as_ref().and_then(|r| r.last_at);
    let times = [s.last_seen_at, s.last_delivery_at, s.last_wake_at];
    times.into_iter().chain([paid, rewound]).flatten().max()
}

/// `3m ago`, `in 2h`, `now`: the distance from `now` in at most two units.
pub(super) fn relative(at: Timestamp, now: Timestamp) -> String {
    let ms = at.as_millisecond().saturating_sub(now.as_millisecond());
    match (ms.unsigned_abs() + 500) / 1000 {
        0 => "now".into(),
        secs if ms < 0 => format!("{} ago", span(secs)),
        secs => format!("in {}", span(secs)),
    }
}

/// `45s`, `12m`, `3h 5m`, `2d 4h`: the second unit only while it still matters.
fn span(secs: u64) -> String {
    let (big, small) = match secs {
        0..60 => return format!("{secs}s"),
        60..3600 => return format!("{}m", secs / 60),
        3600..86_400 => ((secs / 3600, "h"), (secs % 3600 / 60, "m")),
        _ => ((secs / 86_400, "d"), (secs % 86_400 / 3600, "h")),
    };
    match (big, small) {
        ((n, unit), (0, _)) | ((n @ 10.., unit), _) => format!("{n}{unit}"),
        ((n, unit), (m, small)) => format!("{n}{unit} {m}{small}"),
    }
}

/// `paused`, or `paused until 15:00` when the end is known.
pub(super) fn until(what: &str, end: Option<Timestamp>, view: &View) -> String {
    end.map_or(what.into(), |at| {
        format!("{what} until {}", clock(at, view))
    })
}

/// `15:00` within a day of now, else `Dec 03 15:00`.
fn clock(at: Timestamp, view: &View) -> String {
    let within_day = (at.as_millisecond() - view.now.as_millisecond()).abs() < 86_400_000;
    let format = if within_day { "%H:%M" } else { "%b %d %H:%M" };
    let zoned = at.to_zoned_datetime(view.tz.clone());
    zoned.strftime(format).to_string()
}

/// For each id in `ids`, the shortest prefix of at least [`MIN_ID_CHARS`] characters that no
/// other id in `among` shares (the whole id when it is shorter).
pub fn short_ids<'a>(ids: &[&'a str], among: &[&str]) -> Vec<&'a str> {
    let shared = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(a, b)| a == b).count();
    ids.iter()
        .map(|id| {
            let others = among.iter().filter(|other| *other != id);
            let common = others.map(|other| shared(id, other)).max().unwrap_or(0);
            id.char_indices()
                .nth((common + 1).max(MIN_ID_CHARS))
                .map_or(*id, |(at, _)| &id[..at])
        })
        .collect()
}

/// Every id a user may name a session by: the ids `/sessions` lists and the ones they had
/// before a `/clear` (`rewind.formerly`).
pub fn known_ids(sessions: &[SessionStatus]) -> Vec<&str> {
    let formerly = sessions.iter().flat_map(|s| s.rewind.iter());
    let formerly = formerly.flat_map(|r| &r.formerly);
    let ids = sessions.iter().map(|s| &s.session_id).chain(formerly);
    ids.map(String::as_str).collect()
}

/// `text` cut to `width` columns, with an ellipsis where something was cut.
pub(super) fn cut(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    // The characters that fit with a column left for the ellipsis.
    let mut out: String = (text.chars())
        .scan(1, |used, c| {
            *used += c.width().unwrap_or(0);
            (*used <= width).then_some(c)
        })
        .collect();
    if width > 0 {
        out.push('\u{2026}');
    }
    out
}

/// `█████░░░ 62%`.
pub(super) fn bar(percent: f64) -> String {
    let filled = (percent.clamp(0.0, 100.0) / 100.0 * BAR_CELLS as f64).round() as usize;
    let empty = BAR_CELLS - filled.min(BAR_CELLS);
    let (full, empty) = ("\u{2588}".repeat(filled), "\u{2591}".repeat(empty));
    format!("{full}{empty} {percent:.0}%")
}

/// The cwd's last component (`/work/wakebridge` → `wakebridge`).
fn project(s: &SessionStatus) -> String {
    let Some(cwd) = s.cwd.as_deref() else {
        return "-".into();
    };
    match cwd.trim_end_matches('/').rsplit('/').next() {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => cwd.to_owned(),
    }
}

/// The tmux (or zellij) session the pane is in, else the pane's id; `inbox` for a session
/// reached through its inbox alone.
fn mux_session(s: &SessionStatus) -> String {
    let Some(pane) = &s.pane else {
        let reachable = s.inbox.as_ref().is_some_and(|i| i.live);
        return if reachable { "inbox" } else { "-" }.into();
    };
    let session = pane.session.as_deref().filter(|n| !n.is_empty());
    match (pane.mux.as_str(), session) {
        ("zellij", Some(session)) => format!("zellij:{session}"),
        (_, Some(session)) => session.to_owned(),
        (_, None) => pane.pane.clone(),
    }
}

/// What happens next: a resume at a limit's reset, a waiting rewind, an owed wake, a nudge.
fn next(s: &SessionStatus, view: &View) -> String {
    let limited = s.state == SessionState::Limited;
    let limit = s.limit.as_ref().filter(|_| limited);
    let waiting = s.rewind.as_ref().and_then(|r| r.waiting.as_deref());
    let nudge = s.nudge.as_ref();
    if let Some(at) = limit.filter(|l| !l.gave_up).and_then(|l| l.resets_at) {
        return format!("resume {}", relative(at, view.now));
    }
    if let Some(since) = s.inbox.as_ref().and_then(|i| i.unheard_since) {
        return format!("inbox unheard since {}", clock(since, view));
    }
    match s.state {
        SessionState::Ended | SessionState::NoPane | SessionState::Paused => "-".into(),
        _ if limit.is_some_and(|l| l.gave_up) => "waits for activity".into(),
        _ if waiting == Some("restart") => "restart waiting".into(),
        _ if waiting.is_some() => "rewind waiting".into(),
        // The loop says since when it has been idle only while it looks idle.
        SessionState::Owed if nudge.and_then(|n| n.idle_since).is_some() => "wake when idle".into(),
        SessionState::Owed => "wake at turn end".into(),
        _ if s.watched.is_some() => "watched only".into(),
        _ => match nudge.and_then(|n| n.next_nudge_at) {
            Some(at) if at <= view.now => "nudge due".into(),
            Some(at) => format!("nudge {}", relative(at, view.now)),
            None => "-".into(),
        },
    }
}

fn header(health: Option<&Health>, view: &View, shown: usize, hidden: usize) -> String {
    let mut parts = match health {
        Some(h) => {
            let up = view.now.duration_since(h.started_at).as_secs();
            let bus = match h.registered {
                Some(true) => "registered",
                Some(false) => "not registered",
                None => "registration off",
            };
            vec![
                format!("wakebridge {}", h.version),
                format!("pid {}", h.pid),
                format!("up {}", span(u64::try_from(up).unwrap_or(0))),
                format!("bus: {bus}"),
            ]
        }
        None => vec!["wakebridge (no /health answer)".into()],
    };
    let plural = if shown == 1 { "" } else { "s" };
    parts.push(match hidden {
        0 => format!("{shown} session{plural}"),
        _ => format!("{shown} session{plural}, {hidden} ended hidden (--all)"),
    });
    parts.join(" \u{b7} ")
}

/// Under the header: the usage windows (`budget: 5h 62% · resets 15:00 · week 41%`, one account
/// after another, named when there are several, a stale share marked `?`) and what wakebridge's
/// texts cost today (`today: 9 nudges, 41k tokens`).
fn spend_line(budgets: &[Budget], today: Option<&Today>, view: &View) -> Option<String> {
    let named = budgets.len() > 1;
    let accounts: Vec<String> = budgets
        .iter()
        .map(|b| {
            let mut parts = Vec::new();
            for (short, window) in [("5h", &b.five_hour), ("week", &b.seven_day)] {
                let Some(w) = window else { continue };
                let stale = if w.stale { "?" } else { "" };
                parts.push(format!("{short} {}%{stale}", w.used_percentage.round()));
                if short == "5h"
                    && let Some(at) = w.resets_at
                {
                    parts.push(format!("resets {}", clock(at, view)));
                }
            }
            let parts = parts.join(" \u{b7} ");
            match named {
                true => format!("{parts} ({})", b.account),
                false => parts,
            }
        })
        .collect();
    let budget = (!accounts.is_empty()).then(|| format!("budget: {}", accounts.join("; ")));
    let today = today
        .filter(|t| t.nudges > 0 || t.caused_tokens > 0)
        .map(|t| {
            let plural = if t.nudges == 1 { "" } else { "s" };
            let tokens = tokens(t.caused_tokens);
            format!("today: {} nudge{plural}, {tokens} tokens", t.nudges)
        });
    let parts: Vec<String> = budget.into_iter().chain(today).collect();
    (!parts.is_empty()).then(|| parts.join(" \u{b7} "))
}

/// `812`, `41k`, `1.2M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..999_500 => format!("{}k", (n + 500) / 1_000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Live sessions by id, then ended ones (within [`ENDED_SHOWN_FOR`] unless `all`), most recent
/// first; and how many ended ones it hides.
fn shown<'a>(sessions: &'a [SessionStatus], view: &View) -> (Vec<&'a SessionStatus>, usize) {
    let (mut live, mut over): (Vec<_>, Vec<_>) = sessions
        .iter()
        .partition(|s| s.state != SessionState::Ended);
    let recent = |s: &&SessionStatus| {
        last_activity(s).is_some_and(|at| view.now.duration_since(at) <= ENDED_SHOWN_FOR)
    };
    let ended = over.len();
    if !view.all {
        over.retain(recent);
    }
    let hidden = ended - over.len();
    live.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    over.sort_by_key(|s| Reverse(last_activity(s)));
    live.extend(over);
    (live, hidden)
}

/// Columns: header, widest, narrowest, and when squeezed: the names and the next step give way
/// first, the state and the context (what a glance is for) last.
const COLUMNS: [(&str, usize, usize, u8); 8] = [
    ("SESSION", 20, MIN_ID_CHARS, 1),
    ("PROJECT", 18, 6, 0),
    ("AGENT", 6, 5, 0),
    ("TMUX", 12, 4, 0),
    ("STATE", 22, 8, 1),
    ("CONTEXT", 13, 4, 1),
    ("ACTIVE", 10, 6, 1),
    ("NEXT", 24, 6, 0),
];

/// The AGENT column's place in [`COLUMNS`]: shown when the sessions run more than Claude Code.
const AGENT: usize = 2;
/// The STATE column's place, coloured by the state.
const STATE: usize = 4;

/// The whole glance: a header line, then one line per shown session, every line at most
/// `view.width` columns wide (display width); nothing wraps, long cells end in `…`.
pub fn render(listed: &Sessions, health: Option<&Health>, view: &View) -> String {
    let sessions = &listed.sessions;
    let (rows, hidden) = shown(sessions, view);
    let mut out = cut(&header(health, view, rows.len(), hidden), view.width) + "\n";
    if let Some(spend) = spend_line(&listed.budgets, listed.today.as_ref(), view) {
        out += &(cut(&spend, view.width) + "\n");
    }
    if let Some(pause) = &listed.paused {
        let paused = until("every session paused", pause.until, view);
        let line = format!("{paused} · `wakebridge unpause --all` lifts it");
        out += &(cut(&line, view.width) + "\n");
    }
    if rows.is_empty() {
        let text = match hidden {
            0 => {
                "no sessions known yet (none mapped in panes.json, none seen by `wakebridge hook`)"
            }
            _ => "no live sessions; `wakebridge status --all` shows the ended ones",
        };
        return out + &cut(text, view.width) + "\n";
    }
    // Claude Code's sessions alone: no AGENT column to say so on every line.
    let several_agents = rows.iter().any(|s| s.agent != Agent::Claude);
    let ids: Vec<&str> = rows.iter().map(|s| s.session_id.as_str()).collect();
    let short = short_ids(&ids, &known_ids(sessions));
    let cells: Vec<[String; 8]> = rows
        .iter()
        .zip(short)
        .map(|(s, id)| {
            let context = s.context.as_ref().and_then(|c| c.percent);
            let active = last_activity(s).map(|at| relative(at, view.now));
            [
                id.to_owned(),
                project(s),
                if several_agents { s.agent.as_str() } else { "" }.to_owned(),
                mux_session(s),
                label(s, view),
                context.map_or("-".into(), bar),
                active.unwrap_or_else(|| "-".into()),
                next(s, view),
            ]
        })
        .collect();
    let mut head = COLUMNS.map(|(name, ..)| name.to_owned());
    if !several_agents {
        head[AGENT].clear();
    }
    let widths = widths(&head, &cells, view.width);
    out.push_str(&line(&head, &widths, view, None));
    for (row, s) in cells.iter().zip(&rows) {
        out.push_str(&line(row, &widths, view, Some(s.state)));
    }
    out
}

/// Each column's width: as wide as its widest cell (within its cap), then the widest ones
/// squeezed a column at a time until the line fits `width`.
/// A column whose header and cells are all empty takes no width and no gap.
fn widths(head: &[String; 8], cells: &[[String; 8]], width: usize) -> [usize; 8] {
    let mut widths = [0; 8];
    for (c, (_, cap, ..)) in COLUMNS.iter().enumerate() {
        let widest = cells.iter().map(|r| r[c].width()).max().unwrap_or(0);
        widths[c] = widest.max(head[c].width()).min(*cap);
    }
    let gaps = |widths: &[usize]| GAP * widths.iter().filter(|w| **w > 0).count();
    while widths.iter().sum::<usize>() + gaps(&widths).saturating_sub(GAP) > width {
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

fn line(
    row: &[String; 8],
    widths: &[usize; 8],
    view: &View,
    state: Option<SessionState>,
) -> String {
    let parts: Vec<String> = (row.iter().zip(widths))
        .filter(|(_, width)| **width > 0)
        .map(|(cell, width)| {
            // Padded to exactly its width; the line's end is trimmed.
            let mut text = cut(cell, *width);
            let pad = width.saturating_sub(text.width());
            text.extend(std::iter::repeat_n(' ', pad));
            text
        })
        .collect();
    // Past the narrowest layout (a tiny terminal), the line itself is cut.
    let mut text = cut(parts.join(&" ".repeat(GAP)).trim_end(), view.width);
    if let (true, Some(state)) = (view.color, state) {
        // Colour the state cell after the layout: escapes take no columns.
        let before = &widths[..STATE];
        let shown = before.iter().filter(|w| **w > 0).count();
        let start: usize = before.iter().sum::<usize>() + shown * GAP;
        if let Some(at) = byte_at(&text, start) {
            let end = byte_at(&text, start + widths[STATE]).unwrap_or(text.len());
            let (cell, rest) = (&text[at..end], &text[end..]);
            text = format!("{}\x1b[{}m{cell}\x1b[0m{rest}", &text[..at], colour(state));
        }
    }
    text + "\n"
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
    use crate::api::{self, Shown};

    /// 2026-12-01T12:00:00Z, the fixture's "now".
    const NOW_S: i64 = 1_796_126_400;

    fn now() -> Timestamp {
        Timestamp::from_second(NOW_S).unwrap()
    }

    /// `secs` from now.
    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(NOW_S + secs).unwrap()
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

    fn pane(session: &str) -> Option<api::Pane> {
        Some(api::Pane {
            mux: "tmux".into(),
            pane: "%3".into(),
            session: Some(session.into()),
        })
    }

    fn context(percent: f64) -> Option<api::Context> {
        Some(api::Context {
            percent: Some(percent),
            used_tokens: None,
            context_window: 200_000,
            model: None,
            source: "default".into(),
            usage_source: None,
            transcript: None,
            updated_at: None,
            pending_warning: None,
            last_warning: None,
            last_warning_at: None,
        })
    }

    fn nudge(unanswered: u32, acknowledged: bool, next_in: Option<i64>) -> Option<api::Nudge> {
        Some(api::Nudge {
            unanswered,
            last_nudge_at: None,
            next_nudge_at: next_in.map(at),
            acknowledged,
            idle_since: Some(at(-600)),
        })
    }

    fn limit(resets_in: i64, gave_up: bool) -> Option<api::Limit> {
        Some(api::Limit {
            kind: "5-hour limit".into(),
            resets_at: Some(at(resets_in)),
            resets_text: None,
            seen_how: "hook".into(),
            since: at(-600),
            tries: 0,
            gave_up,
            shown: "resets 14:00, in 2h".into(),
        })
    }

    /// A mapped, idle session seen a minute ago.
    fn session(id: &str) -> SessionStatus {
        SessionStatus {
            session_id: id.into(),
            agent: crate::agent::Agent::Claude,
            pane: pane("agents"),
            state: SessionState::Idle,
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
            inbox: None,
            pause: None,
            watched: None,
        }
    }

    /// `session(id)` in `state`.
    fn in_state(id: &str, state: SessionState) -> SessionStatus {
        SessionStatus {
            state,
            ..session(id)
        }
    }

    /// One session in every state, each with an id of its own.
    fn fixture() -> Vec<SessionStatus> {
        let mut working = in_state(
            "a1b2c3d4-0000-4000-8000-000000000001",
            SessionState::Working,
        );
        working.last_seen_at = Some(at(-5));
        working.context = context(62.4);
        let mut nudged = in_state("a1b2ffee-0000-4000-8000-000000000002", SessionState::Nudged);
        nudged.nudge = nudge(1, false, Some(240));
        nudged.context = context(100.0);
        let dialog = in_state("b0000000-0000-4000-8000-000000000003", SessionState::Dialog);
        let draft = in_state("b1000000-0000-4000-8000-000000000004", SessionState::Draft);
        let mut limited = in_state(
            "c0000000-0000-4000-8000-000000000005",
            SessionState::Limited,
        );
        limited.limit = limit(2 * 3600, false);
        let mut gave_up = in_state(
            "c1000000-0000-4000-8000-000000000006",
            SessionState::Limited,
        );
        gave_up.limit = limit(-600, true);
        let mut owed = in_state("d0000000-0000-4000-8000-000000000007", SessionState::Owed);
        owed.owed = Some(api::Owed {
            events: 3,
            since: at(-120),
        });
        owed.nudge = nudge(0, false, None);
        let mut acknowledged = in_state(
            "d1000000-0000-4000-8000-000000000008",
            SessionState::AcknowledgedIdle,
        );
        acknowledged.nudge = nudge(5, true, None);
        let mut no_pane = in_state("e0000000-0000-4000-8000-000000000009", SessionState::NoPane);
        no_pane.pane = None;
        no_pane.cwd = None;
        no_pane.last_hook_event = None;
        no_pane.last_seen_at = None;
        no_pane.last_delivery_at = Some(at(-30));
        let mut just_ended = in_state("f0000000-0000-4000-8000-00000000000a", SessionState::Ended);
        just_ended.pane = None;
        just_ended.last_seen_at = Some(at(-300));
        let mut long_ended = in_state("f1000000-0000-4000-8000-00000000000b", SessionState::Ended);
        long_ended.pane = None;
        long_ended.last_seen_at = Some(at(-3 * 3600));
        let mut gone_quiet = in_state("f2000000-0000-4000-8000-00000000000c", SessionState::Ended);
        gone_quiet.pane = None;
        gone_quiet.last_seen_at = Some(at(-2 * 86_400));
        let mut rewinding = in_state(
            "a9000000-0000-4000-8000-00000000000d",
            SessionState::Rewinding,
        );
        rewinding.rewind = Some(api::Rewind {
            performed: 0,
            last_at: None,
            last_why: None,
            last_outcome: None,
            last_detail: None,
            waiting: Some("asked".into()),
            formerly: vec!["99999999-old".into()],
            shown: "not rewound yet (asked rewind waiting)".into(),
        });
        let idle = in_state("a1b2aaaa-0000-4000-8000-00000000000e", SessionState::Idle);
        vec![
            working,
            nudged,
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
            idle,
        ]
    }

    fn listed(sessions: &[SessionStatus]) -> Sessions {
        Sessions {
            sessions: sessions.to_vec(),
            budgets: Vec::new(),
            today: None,
            paused: None,
        }
    }

    fn health() -> Health {
        Health {
            status: "ok".into(),
            service: "wakebridge".into(),
            version: "0.1.0".into(),
            pid: 4242,
            started_at: at(-3 * 3600 - 720),
            config_file: Shown::Hidden,
            bus_url: None,
            backend: None,
            registered: Some(true),
            webhook_id: Shown::Hidden,
            last_verified_at: Shown::Hidden,
            fleet: None,
        }
    }

    fn line_of<'a>(text: &'a str, id_prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(id_prefix))
            .unwrap_or_else(|| panic!("no line for {id_prefix} in\n{text}"))
    }

    #[test]
    fn a_session_its_inbox_alone_reaches_says_so() {
        let mut reached = in_state("e2000000-0000-4000-8000-00000000000f", SessionState::Idle);
        reached.pane = None;
        reached.inbox = Some(api::Inbox {
            live: true,
            problem: None,
            last_sent_at: Some(at(-600)),
            heard_at: None,
            held: false,
            unheard_since: None,
        });
        let text = render(&listed(&[reached.clone()]), None, &view(DEFAULT_WIDTH));
        let line = line_of(&text, "e2000000 ");
        assert!(line.contains("  inbox  "), "{line}");
        assert!(line.contains("  idle  "), "{line}");
        assert!(!text.contains("unheard"), "{text}");
        // A message it never reported, as the daemon judged it.
        reached.inbox.as_mut().unwrap().unheard_since = Some(at(-600));
        let text = render(&listed(&[reached.clone()]), None, &view(DEFAULT_WIDTH));
        assert!(
            line_of(&text, "e2000000 ").contains("inbox unheard since"),
            "{text}"
        );
        // Only watched: said so where a kept session's next nudge would be.
        reached.inbox.as_mut().unwrap().unheard_since = None;
        reached.watched = Some("[nudger] keep = \"agents\", …".into());
        let text = render(&listed(&[reached]), None, &view(DEFAULT_WIDTH));
        assert!(
            line_of(&text, "e2000000 ").ends_with("watched only"),
            "{text}"
        );
    }

    #[test]
    fn every_state_reads_as_a_person_would_say_it() {
        let text = render(&listed(&fixture()), None, &view(DEFAULT_WIDTH));
        let cases = [
            ("a1b2c3d4 ", "working"),
            ("a1b2ffee ", "nudged"),
            ("a1b2aaaa ", "idle"),
            ("b0000000 ", "waiting on a dialog"),
            ("b1000000 ", "draft at the prompt"),
            ("c0000000 ", "limited until 14:00"),
            ("c1000000 ", "limited, gave up"),
            ("d0000000 ", "owed 3"),
            ("d1000000 ", "acknowledged idle"),
            ("e0000000 ", "no pane"),
            ("f0000000 ", "ended"),
            ("a9000000 ", "rewinding"),
        ];
        for (id, state) in cases {
            let line = line_of(&text, id);
            assert!(line.contains(&format!("  {state}  ")), "{id}: {line}");
        }
        assert!(line_of(&text, "a1b2c3d4 ").contains("wakebridge  agents"));
        assert!(
            line_of(&text, "e0000000 ").contains("  -  "),
            "unreachable: no pane"
        );
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
        let text = render(&listed(&sessions), None, &view(DEFAULT_WIDTH));
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
                .ends_with("12 sessions, 2 ended hidden (--all)")
        );
        let all = render(
            &listed(&sessions),
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
        assert!(all.lines().next().unwrap().ends_with("14 sessions"));
    }

    #[test]
    fn every_line_fits_the_width_in_display_columns() {
        let mut sessions = fixture();
        sessions[0].cwd = Some("/srv/a-project-with-a-very-long-name-indeed-and-more".into());
        sessions[1].cwd = Some("/srv/\u{65e5}\u{672c}\u{8a9e}\u{306e}\u{30d7}\u{30ed}\u{30b8}\u{30a7}\u{30af}\u{30c8}\u{540d}\u{524d}".into());
        sessions[2].pane = pane("a-tmux-session-name-that-goes-on");
        let health = health();
        for width in [DEFAULT_WIDTH, 80, 60, 40, 20] {
            for all in [false, true] {
                let text = render(
                    &listed(&sessions),
                    Some(&health),
                    &View { all, ..view(width) },
                );
                for line in text.lines() {
                    assert!(line.width() <= width, "{} > {width}: {line}", line.width());
                }
            }
        }
        let text = render(&listed(&sessions), Some(&health), &view(DEFAULT_WIDTH));
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
            "wakebridge 0.1.0 \u{b7} pid 4242 \u{b7} up 3h 12m \u{b7} bus: registered \u{b7} 12 sessions, 2 ended hidden (--all)"
        );
        assert_eq!(
            text.lines().nth(1).unwrap(),
            "SESSION   PROJECT          TMUX          STATE                CONTEXT        ACTIVE   NEXT"
        );
    }

    #[test]
    fn colour_goes_on_the_state_cell_only() {
        let text = render(
            &listed(&fixture()),
            None,
            &View {
                color: true,
                ..view(DEFAULT_WIDTH)
            },
        );
        let line = line_of(&text, "a1b2c3d4 ");
        assert!(line.contains("\x1b[33mworking"), "{line:?}");
        assert!(!text.lines().nth(1).unwrap().contains('\x1b'));
        let plain = render(&listed(&fixture()), None, &view(DEFAULT_WIDTH));
        assert!(!plain.contains('\x1b'));
    }

    /// Claude Code's sessions alone show no AGENT column; one Codex session brings it, and the
    /// state cell keeps its colour past the extra column.
    #[test]
    fn an_agent_column_once_the_sessions_run_more_than_claude_code() {
        let mut sessions = fixture();
        let plain = render(&listed(&sessions), None, &view(DEFAULT_WIDTH));
        assert!(!plain.lines().nth(1).unwrap().contains("AGENT"), "{plain}");
        let codex = (sessions.iter_mut())
            .find(|s| s.session_id.starts_with("d1000000"))
            .unwrap();
        codex.agent = Agent::Codex;
        let wide = View {
            color: true,
            ..view(140)
        };
        let text = render(&listed(&sessions), None, &wide);
        assert!(text.lines().nth(1).unwrap().contains("  AGENT  "), "{text}");
        assert!(line_of(&text, "d1000000 ").contains("  codex   "), "{text}");
        assert!(line_of(&text, "a1b2c3d4 ").contains("  claude  "), "{text}");
        let line = line_of(&text, "a1b2c3d4 ");
        assert!(line.contains("\x1b[33mworking"), "{line:?}");
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
        let text = render(&listed(&fixture()), None, &view(DEFAULT_WIDTH));
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
    fn the_budget_and_todays_cost_sit_under_the_header_when_known() {
        let window = |used: f64, stale: bool| {
            Some(api::BudgetWindow {
                used_percentage: used,
                resets_at: Some(at(2 * 3600)),
                seen_at: Some(now()),
                stale,
            })
        };
        let mut listed = listed(&fixture());
        assert_eq!(
            render(&listed, None, &view(DEFAULT_WIDTH))
                .lines()
                .nth(1)
                .map(|l| l.starts_with("SESSION")),
            Some(true)
        );
        listed.budgets = vec![api::Budget {
            account: "/home/me/.claude".into(),
            five_hour: window(61.6, false),
            seven_day: window(41.0, true),
        }];
        listed.today = Some(api::Today {
            nudges: 9,
            caused_tokens: 41_200,
        });
        let text = render(&listed, None, &view(DEFAULT_WIDTH));
        let clock = clock(at(2 * 3600), &view(DEFAULT_WIDTH));
        assert_eq!(
            text.lines().nth(1),
            Some(
                format!(
                    "budget: 5h 62% · resets {clock} · week 41%? · today: 9 nudges, 41k tokens"
                )
                .as_str()
            )
        );
        listed.budgets.clear();
        listed.today = Some(api::Today {
            nudges: 1,
            caused_tokens: 1_234_567,
        });
        let text = render(&listed, None, &view(DEFAULT_WIDTH));
        assert_eq!(text.lines().nth(1), Some("today: 1 nudge, 1.2M tokens"));
    }

    #[test]
    fn a_pause_of_every_session_shows_even_with_none_known() {
        let mut listed = listed(&[]);
        assert!(!render(&listed, None, &view(DEFAULT_WIDTH)).contains("paused"));
        listed.paused = Some(api::Pause {
            since: now(),
            until: Some(at(3600)),
            all: true,
        });
        let text = render(&listed, None, &view(DEFAULT_WIDTH));
        let clock = clock(at(3600), &view(DEFAULT_WIDTH));
        assert_eq!(
            text.lines().nth(1),
            Some(
                format!("every session paused until {clock} · `wakebridge unpause --all` lifts it")
                    .as_str()
            )
        );
        assert!(text.contains("no sessions known yet"), "{text}");
        listed.paused.as_mut().unwrap().until = None;
        let text = render(&listed, None, &view(DEFAULT_WIDTH));
        assert_eq!(
            text.lines().nth(1),
            Some("every session paused · `wakebridge unpause --all` lifts it")
        );
    }

    #[test]
    fn an_empty_view_says_why() {
        assert!(render(&listed(&[]), None, &view(DEFAULT_WIDTH)).contains("no sessions known yet"));
        let mut old = in_state("f1000000-0000-4000-8000-00000000000b", SessionState::Ended);
        old.pane = None;
        old.last_seen_at = Some(at(-3 * 3600));
        let text = render(&listed(&[old]), None, &view(DEFAULT_WIDTH));
        assert!(
            text.contains("no live sessions; `wakebridge status --all`"),
            "{text}"
        );
        assert!(
            text.starts_with("wakebridge (no /health answer) \u{b7} 0 sessions, 1 ended hidden")
        );
    }
}
