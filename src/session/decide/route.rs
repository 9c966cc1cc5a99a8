//! How a text reaches a session, pure: what it meets on its way ([`Told`]) in, the [`Route`]
//! out. `session::gate` reads it before each wake and performs it.

use crate::api::Action;
use crate::mux::KeystrokeText;
use crate::reading::inbox::Inbox;
use crate::session::gate::Mode;
use crate::wakedir::target::PaneTarget;

/// What a text meets on its way to a session, as the gate reads it before each wake.
#[derive(Debug, Clone, Copy)]
pub struct Told<'a> {
    pub text: &'a KeystrokeText,
    pub mode: Mode,
    /// Its pane, mapped in panes.json.
    pub pane: Option<&'a PaneTarget>,
    /// Its inbox, usable now (`SessionFacts::inbox`).
    pub inbox: Option<&'a Inbox>,
    /// A person paused it.
    pub paused: bool,
    /// Held at a usage limit (with `[limits] enabled`).
    pub limited: bool,
    /// Claude Code holds the last message to its inbox for a human.
    pub message_held: bool,
    /// A fresh busy marker: a turn runs.
    pub busy: bool,
    /// Its agent's screen shows every running turn; where not (Codex, while a reply streams),
    /// no one may type past its busy marker on the strength of a look.
    pub screen_shows_turns: bool,
}

/// How a text reaches the session now: its inbox first (a running turn is no reason to wait),
/// then typed into its pane (or why not); `Err`: nothing can, and the action a bus event is
/// answered with. The one rule for every text, a bus event's or the loop's own; the cooldown
/// is the gate's to reserve as it types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub inbox: Option<Inbox>,
    pub typed: Result<PaneTarget, Action>,
}

pub fn route(told: &Told) -> Result<Route, Action> {
    if told.paused {
        return Err(Action::SpoolPaused);
    }
    // The resume at a limit's reset goes through the hold it lifts.
    let held = told.limited && told.mode != Mode::Resume;
    let inbox = told
        .inbox
        .filter(|_| by_inbox(told.text, told.mode, told.pane.is_some()));
    // Neither sent again (one more to answer) nor typed (into the Deny/Deliver dialog).
    if inbox.is_some() && (held || told.message_held) {
        return Err(Action::SpoolBusy);
    }
    let skips_marker =
        matches!(told.mode, Mode::Forced | Mode::SeenIdle) && told.screen_shows_turns;
    let marker_holds = told.busy && !skips_marker;
    let typed = match told.pane {
        None => Err(Action::SpoolUnmapped),
        Some(_) if held || marker_holds => Err(Action::SpoolBusy),
        Some(pane) => Ok(pane.clone()),
    };
    match (inbox, typed) {
        (None, Err(action)) => Err(action),
        (inbox, typed) => Ok(Route {
            inbox: inbox.cloned(),
            typed,
        }),
    }
}

/// Whether `text` may go through the session's inbox rather than be typed. Slash commands
/// never: the inbox hands them to the model as text. Nor a resume at a usage limit where there
/// is a pane: an inbox message leaves Claude Code's own pending auto-continue armed and its
/// "Usage limit reached · Continuing shortly" banner up (seen on 2.1.332), where a typed prompt
/// cancels both.
fn by_inbox(text: &KeystrokeText, mode: Mode, has_pane: bool) -> bool {
    let typed_only = text.as_str().starts_with('/') || (mode == Mode::Resume && has_pane);
    !typed_only
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_goes_by_the_inbox_first_and_is_typed_only_where_nothing_holds_the_pane() {
        let pane = PaneTarget::Tmux {
            pane: "%1".into(),
            session: None,
        };
        let inbox = Inbox {
            socket: "/run/cc-socks/1.sock".into(),
            token: None,
            pid: None,
            thread: None,
        };
        let (wake, clear) = (KeystrokeText::wake_prompt(), KeystrokeText::clear());
        let told = Told {
            text: &wake,
            mode: Mode::Gated,
            pane: Some(&pane),
            inbox: Some(&inbox),
            paused: false,
            limited: false,
            message_held: false,
            busy: false,
            screen_shows_turns: true,
        };
        let both = Route {
            inbox: Some(inbox.clone()),
            typed: Ok(pane.clone()),
        };
        assert_eq!(route(&told), Ok(both.clone()));
        let paused = Told {
            paused: true,
            ..told
        };
        assert_eq!(route(&paused), Err(Action::SpoolPaused));
        // A running turn holds typing, not the inbox.
        let busy = Told { busy: true, ..told };
        let by_inbox = Route {
            typed: Err(Action::SpoolBusy),
            ..both.clone()
        };
        assert_eq!(route(&busy), Ok(by_inbox.clone()));
        let forced = Told {
            mode: Mode::Forced,
            ..busy
        };
        assert_eq!(route(&forced), Ok(both.clone()));
        // Unless its screen may hide a running turn: then the marker holds typing all the same.
        for mode in [Mode::Forced, Mode::SeenIdle] {
            let blind = Told {
                mode,
                screen_shows_turns: false,
                ..busy
            };
            assert_eq!(route(&blind), Ok(by_inbox.clone()));
        }
        // A limit or a message held for a human holds everything.
        for held in [
            Told {
                limited: true,
                ..told
            },
            Told {
                message_held: true,
                ..told
            },
        ] {
            assert_eq!(route(&held), Err(Action::SpoolBusy));
        }
        // Typed only: a slash command, and a resume into a pane; the resume lifts the hold.
        let typed = Route {
            inbox: None,
            typed: Ok(pane.clone()),
        };
        let slash = Told {
            text: &clear,
            ..told
        };
        assert_eq!(route(&slash), Ok(typed.clone()));
        let resume = Told {
            mode: Mode::Resume,
            limited: true,
            ..told
        };
        assert_eq!(route(&resume), Ok(typed));
        // No pane: the inbox, or nothing.
        let inbox_only = Told { pane: None, ..told };
        let only = Route {
            inbox: Some(inbox.clone()),
            typed: Err(Action::SpoolUnmapped),
        };
        assert_eq!(route(&inbox_only), Ok(only));
        let nowhere = Told {
            inbox: None,
            ..inbox_only
        };
        assert_eq!(route(&nowhere), Err(Action::SpoolUnmapped));
    }
}
