//! `wakebridge status --fleet`: `/fleet` as one glance, a line for each machine (online or
//! when last seen) and its sessions under it with a MACHINE column. Pure, as `glance` is.

use unicode_width::UnicodeWidthStr;

use super::glance::{View, bar, colour, cut, relative, until};
use crate::api::{Fleet, FleetSession, Machine, SessionState};

const COLUMNS: [&str; 6] = ["MACHINE", "SESSION", "PROJECT", "STATE", "CONTEXT", "NEXT"];
const GAP: &str = "  ";

/// The ids of `machine`'s sessions in a `/fleet` answer, to resolve a typed prefix against;
/// why not, naming the machines there are, when the fleet has no such machine.
pub fn session_ids(fleet: &serde_json::Value, machine: &str) -> Result<Vec<String>, String> {
    let fleet: Fleet = serde_json::from_value(fleet.clone())
        .map_err(|e| format!("the daemon's /fleet answer does not read ({e})"))?;
    let Some(found) = fleet.machines.iter().find(|m| m.name == machine) else {
        let names: Vec<&str> = fleet.machines.iter().map(|m| m.name.as_str()).collect();
        let why = fleet.problem.map_or(String::new(), |p| format!(" ({p})"));
        return Err(format!(
            "no machine named {machine:?} in the fleet; machines: {}{why}",
            names.join(", ")
        ));
    };
    let sessions = found.status.iter().flat_map(|s| &s.sessions);
    Ok(sessions.map(|s| s.id.clone()).collect())
}

pub fn render(fleet: &Fleet, view: &View) -> String {
    let mut out = String::new();
    if let Some(problem) = &fleet.problem {
        out += &(cut(problem, view.width) + "\n");
    }
    if fleet.refused > 0 {
        let line = format!(
            "{} status(es) on the bus failed the fleet signature and are not shown",
            fleet.refused
        );
        out += &(cut(&line, view.width) + "\n");
    }
    let mut rows: Vec<([String; 6], Option<SessionState>)> = Vec::new();
    for machine in &fleet.machines {
        out += &(cut(&machine_line(machine, view), view.width) + "\n");
        for s in machine.status.iter().flat_map(|st| &st.sessions) {
            rows.push((session_row(&machine.name, s, view), Some(s.state)));
        }
    }
    if rows.is_empty() {
        return out + "no sessions on any machine\n";
    }
    let head = COLUMNS.map(str::to_owned);
    let mut widths = head.clone().map(|h| h.width());
    for (row, _) in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.width()).min(24);
        }
    }
    out += &line(&head, &widths, None, view);
    for (row, state) in &rows {
        out += &line(row, &widths, *state, view);
    }
    out
}

fn machine_line(m: &Machine, view: &View) -> String {
    let sessions = m.status.as_ref().map_or(0, |s| s.sessions.len());
    let seen = m.last_seen.map(|at| relative(at, view.now));
    let state = match (m.this, m.online) {
        (true, _) => "this machine".to_owned(),
        (false, true) => "online".to_owned(),
        (false, false) => format!("offline, seen {}", seen.as_deref().unwrap_or("never")),
    };
    let version = (m.status.as_ref()).map_or_else(
        || "no status yet".to_owned(),
        |s| format!("wakebridge {}", s.version),
    );
    format!("{}: {state} · {version} · {sessions} session(s)", m.name)
}

fn session_row(machine: &str, s: &FleetSession, view: &View) -> [String; 6] {
    let state = match s.state {
        SessionState::Limited => until("limited", s.limit_reset, view),
        SessionState::Paused => until("paused", s.paused.as_ref().and_then(|p| p.until), view),
        SessionState::Owed => format!("owed {}", s.owed.unwrap_or(0)),
        state => state.as_str().replace('-', " "),
    };
    let next = s
        .next_nudge
        .map(|at| format!("nudge {}", relative(at, view.now)));
    [
        machine.to_owned(),
        s.id.chars().take(8).collect(),
        s.project.clone().unwrap_or_else(|| "-".into()),
        state,
        s.context.map_or("-".into(), bar),
        next.unwrap_or_else(|| "-".into()),
    ]
}

fn line(
    row: &[String; 6],
    widths: &[usize; 6],
    state: Option<SessionState>,
    view: &View,
) -> String {
    let cells: Vec<String> = (row.iter().zip(widths).enumerate())
        .map(|(c, (cell, width))| {
            let mut text = cut(cell, *width);
            text.extend(std::iter::repeat_n(' ', width.saturating_sub(text.width())));
            match (view.color, state) {
                (true, Some(state)) if c == 3 => format!("\x1b[{}m{text}\x1b[0m", colour(state)),
                _ => text,
            }
        })
        .collect();
    cells.join(GAP).trim_end().to_owned() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachineStatus;

    fn machine(name: &str, this: bool, online: bool, sessions: Vec<FleetSession>) -> Machine {
        Machine {
            name: name.into(),
            this,
            online,
            last_seen: Some("2026-12-06T22:00:00Z".parse().unwrap()),
            status: Some(MachineStatus {
                machine: name.into(),
                version: "0.1.0".into(),
                at: "2026-12-06T22:00:00Z".parse().unwrap(),
                sessions,
                budgets: vec![],
            }),
        }
    }

    fn session(id: &str, state: SessionState) -> FleetSession {
        FleetSession {
            id: id.into(),
            project: Some("parser".into()),
            agent: "claude".into(),
            state,
            context: Some(42.0),
            owed: None,
            limit_reset: None,
            paused: None,
            next_nudge: None,
            rewinds: None,
            unheard_since: None,
        }
    }

    #[test]
    fn every_machine_has_its_line_and_its_sessions_their_machine() {
        let fleet = Fleet {
            machines: vec![
                machine(
                    "alpha",
                    true,
                    true,
                    vec![session("aaaaaaaa-1", SessionState::Idle)],
                ),
                machine(
                    "beta",
                    false,
                    false,
                    vec![session("bbbbbbbb-2", SessionState::Working)],
                ),
            ],
            problem: None,
            refused: 2,
        };
        let view = View {
            now: "2026-12-06T22:05:00Z".parse().unwrap(),
            width: 100,
            all: false,
            color: false,
            tz: jiff::tz::TimeZone::UTC,
        };
        let text = render(&fleet, &view);
        assert!(text.contains("alpha: this machine"), "{text}");
        assert!(text.contains("beta: offline, seen 5m ago"), "{text}");
        assert!(text.contains("2 status(es)"), "{text}");
        let beta = text.lines().find(|l| l.contains("bbbbbbbb")).unwrap();
        assert!(
            beta.starts_with("beta ") && beta.contains("working"),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l.starts_with("MACHINE  SESSION")),
            "{text}"
        );
    }
}
