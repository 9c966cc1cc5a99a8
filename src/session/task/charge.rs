//! Charging a turn to the text of wakebridge's that started it (`budget::caused`), a second
//! after it ended, from the session's transcript (`claude::turn`); and the rule a charged turn
//! feeds: a nudge whose turn called no tool did nothing, so its answer is given back.

use super::Keeper;
use crate::api::TextKind;
use crate::clock::duration_ms;
use crate::reading::hook::HookKind;
use crate::session::io::{SessionFacts, SessionIo};
use crate::session::observe::Observation;
use crate::store::{Caused, Record};

/// How long after a turn ended its transcript is read: Claude Code writes the turn's last
/// record after its Stop hooks ran.
const CHARGE_AFTER_MS: i64 = 1_000;

impl<I: SessionIo> Keeper<I> {
    /// Once a turn ended (and its transcript had a moment to be written out: Claude Code
    /// flushes it after the Stop hook), charges it to the text of wakebridge's that started it,
    /// if one did. Read again whenever the transcript changed until the next turn starts.
    pub(super) async fn charge(
        &mut self,
        sid: &str,
        obs: &Observation,
        facts: &SessionFacts,
        now_ms: i64,
    ) {
        let Some((kind, ended_ms)) = obs.hook else {
            return;
        };
        let settled = now_ms.saturating_sub(ended_ms) >= CHARGE_AFTER_MS;
        let stamp = facts.transcript;
        let between_turns = matches!(kind, HookKind::TurnEnded | HookKind::IdlePrompt);
        let path = facts
            .row
            .transcript_path
            .as_deref()
            .map(std::path::PathBuf::from);
        let (Some(path), true) = (path, settled && between_turns) else {
            return;
        };
        if self.session(sid, |s| std::mem::replace(&mut s.charged, stamp)) == stamp {
            return;
        }
        let Some(turn) = self.io.last_turn(facts.row.agent, path).await else {
            return;
        };
        let text = self.config.texts.kind(&turn.prompt);
        let idle_answer =
            matches!(text, Some(TextKind::Nudge | TextKind::Budget)) && turn.tools == 0;
        if !idle_answer {
            // A turn that did something (or was a person's) ends what an answer could give back.
            self.session(sid, |s| s.answered_from = None);
        }
        let Some(text) = text else {
            return;
        };
        let caused = Caused {
            session_id: sid.to_owned(),
            prompt_id: turn.prompt_id,
            kind: text,
            at_ms: ended_ms,
            tokens: turn.tokens,
            tools: turn.tools,
        };
        self.io.record(vec![Record::Caused(caused)]).await;
        if idle_answer {
            self.idle_answer(sid, ended_ms).await;
        }
    }

    /// A nudge's turn that called no tool did nothing: its answer does not count.
    async fn idle_answer(&mut self, sid: &str, ended_ms: i64) {
        // Its movement shows within a poll of its end at the latest.
        let within = duration_ms(self.config.poll_interval.saturating_mul(2));
        let schedule = self.config.schedule;
        let given_back = self.session(sid, |session| {
            let unanswered = session.idle_answer(ended_ms, within, &schedule)?;
            Some((unanswered, session.nudge_record(sid)))
        });
        let Some((unanswered, record)) = given_back else {
            return;
        };
        tracing::info!(
            session_id = sid,
            unanswered,
            "the nudge's turn called no tool: still unanswered"
        );
        self.io.record(vec![record]).await;
    }
}
