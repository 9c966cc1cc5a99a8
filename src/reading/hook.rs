//! What a hook event says about a session's turn, by the event's name as the ledger recorded
//! it. Claude Code and Codex CLI name their events alike (`Stop`, `UserPromptSubmit`,
//! `PreToolUse`, ...), so one reading serves both.

/// Notification type: the prompt has waited idle a while.
pub const IDLE_PROMPT: &str = "idle_prompt";
/// Notification type: Claude Code's own auto-continue at a usage limit resumed the session.
pub const QUOTA_AUTO_RESUMED: &str = "quota_auto_resume_fired";

/// What a hook event says about the session's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    TurnEnded,
    IdlePrompt,
    Working,
    /// A dialog waits for a human (`permission_prompt`, ...).
    Waiting,
    Ended,
    /// Says nothing about idleness (`SessionStart`, other notifications, unknown events).
    Neutral,
}

impl HookKind {
    /// Whether this event is the session showing life (a turn running or ending): only such an
    /// event answers a nudge or restarts a nudge series.
    pub fn shows_life(self) -> bool {
        matches!(self, HookKind::Working | HookKind::TurnEnded)
    }

    /// Reads an event as the ledger recorded it. A notification's type may follow the name
    /// after `:`, `(` or a space (`Notification:idle_prompt`); a bare `Notification` is neutral.
    pub fn of_recorded(event: &str) -> HookKind {
        let event = event.trim();
        let (name, detail) = event.split_once([':', '(', ' ']).unwrap_or((event, ""));
        let detail = detail.trim().trim_end_matches(')').trim();
        match name {
            "Stop" | "StopFailure" => HookKind::TurnEnded,
            "UserPromptSubmit" | "PreToolUse" | "PostToolUse" | "PostToolUseFailure"
            | "PostToolBatch" | "SubagentStart" | "PreCompact" => HookKind::Working,
            "SessionEnd" => HookKind::Ended,
            "Notification" => match detail {
                IDLE_PROMPT => HookKind::IdlePrompt,
                QUOTA_AUTO_RESUMED => HookKind::Working,
                "permission_prompt"
                | "elicitation_dialog"
                | "elicitation_url_dialog"
                | "agent_needs_input"
                | "worker_permission_prompt" => HookKind::Waiting,
                _ => HookKind::Neutral,
            },
            _ => HookKind::Neutral,
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_events_are_read_with_notification_types() {
        let table = [
            ("Stop", HookKind::TurnEnded),
            ("StopFailure", HookKind::TurnEnded),
            ("UserPromptSubmit", HookKind::Working),
            ("PreToolUse", HookKind::Working),
            ("Notification:idle_prompt", HookKind::IdlePrompt),
            ("Notification(idle_prompt)", HookKind::IdlePrompt),
            ("Notification permission_prompt", HookKind::Waiting),
            ("Notification", HookKind::Neutral),
            ("Notification:auth_success", HookKind::Neutral),
            ("SessionStart", HookKind::Neutral),
            ("SessionEnd", HookKind::Ended),
            ("", HookKind::Neutral),
            ("Stopped", HookKind::Neutral),
        ];
        for (event, kind) in table {
            assert_eq!(HookKind::of_recorded(event), kind, "{event:?}");
        }
    }
}
