//! Everything the session loop reads and writes, behind [`SessionIo`]. [`LiveIo`] is the real
//! one; tests drive the loop with a scripted one on tokio's paused clock.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::budget::Account;
use crate::claude::home::ClaudeHome;
use crate::claude::inbox;
use crate::claude::registry::{RegistryReading, read_registry};
use crate::claude::transcript;
use crate::claude::turn::{self, Turn};
use crate::clock;
use crate::deadline::Deadline;
use crate::mux::{INJECT_BUDGET, InjectError, KeystrokeText, MuxError, PaneInfo};
use crate::rewind::restart::{Restart, RestartSettings};
use crate::session::gate::{Gate, GateOutcome, Mode};
use crate::session::observe::FileStamp;
use crate::store::{InboxRow, Limit, NudgeState, Owed, Record, RewindFacts, Store};
use crate::telemetry::notice::Notice;
use crate::telemetry::warn::Warnings;
use crate::wakedir::reader::mapped_panes;
use crate::wakedir::target::PaneTarget;

/// Budget of one `list-panes -a` or `capture-pane`: tmux answers in milliseconds; one that
/// takes longer is stuck, and the poll goes on without it.
const TMUX_BUDGET: Duration = Duration::from_secs(2);

/// Facts the ledger holds for a session, plus its transcript's stamp.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFacts {
    /// The last hook event name and when the hook last reported (unix ms).
    pub hook: Option<(String, i64)>,
    pub transcript: Option<FileStamp>,
    pub owed: Option<Owed>,
    pub limit: Option<Limit>,
    pub rewind: RewindFacts,
    /// A person paused it: nothing is done for it.
    pub paused: bool,
    /// Claude Code holds the last message to its inbox for a human (`inbox::held`).
    pub message_held: bool,
    /// Its transcript: its account (`budget::account_of`), and the turns to charge.
    pub transcript_path: Option<PathBuf>,
    /// Its nudge series as last recorded: where a session new to the loop takes it up.
    pub nudge: Option<NudgeState>,
}

pub trait SessionIo: Send + Sync {
    /// Session id → pane, from `panes.json` (invalid entries left out).
    fn mapping(&self) -> impl Future<Output = BTreeMap<String, PaneTarget>> + Send;
    fn tmux_snapshot(
        &self,
    ) -> impl Future<Output = Result<HashMap<String, PaneInfo>, MuxError>> + Send;
    fn capture(&self, pane: &str) -> impl Future<Output = Result<String, MuxError>> + Send;
    /// The ledger's facts for each of `sessions` it knows; `None` when the ledger cannot be
    /// read.
    fn session_facts(
        &self,
        sessions: Vec<String>,
    ) -> impl Future<Output = Option<HashMap<String, SessionFacts>>> + Send;
    /// Claims what `sid` is owed for the wake about to be sent, so its Stop hook leaves the debt
    /// to it (`Store::claim_owed`): how many events; `None` when the ledger cannot be written.
    fn claim_owed(&self, sid: &str) -> impl Future<Output = Option<u32>> + Send;
    fn registry(&self) -> impl Future<Output = HashMap<String, RegistryReading>> + Send;
    /// The sessions besides `mapped` that wakebridge keeps (`Store::inbox_candidates`) whose
    /// inbox can be told through now: announced by their hooks, or `live` in Claude Code's
    /// registry. `None` when the ledger cannot be read.
    fn reached_by_inbox(
        &self,
        live: Vec<String>,
        mapped: Vec<String>,
    ) -> impl Future<Output = Option<Vec<String>>> + Send;
    /// Every account's usage windows as the status lines last reported them.
    fn budgets(&self) -> impl Future<Output = Vec<Account>> + Send;
    /// The newest turn of the transcript at `path`.
    fn last_turn(&self, path: PathBuf) -> impl Future<Output = Option<Turn>> + Send;
    fn busy(&self, sid: &str) -> bool;
    fn last_typed(&self, sid: &str) -> Option<Instant>;
    fn wake(
        &self,
        sid: &str,
        text: &KeystrokeText,
        mode: Mode,
    ) -> impl Future<Output = GateOutcome> + Send;
    /// The session's screen, if its pane is mapped, live and readable (any multiplexer).
    fn screen(&self, sid: &str) -> impl Future<Output = Option<String>> + Send;
    fn dismiss_limit_menu(
        &self,
        sid: &str,
    ) -> impl Future<Output = Result<bool, InjectError>> + Send;
    /// Starts `restart` in the background (it records how it ended in the ledger itself).
    fn restart(&self, restart: Restart) -> impl Future<Output = ()> + Send;
    fn record(&self, records: Vec<Record>) -> impl Future<Output = ()> + Send;
    /// When each session last got a budget nudge, as the ledger's deliveries say; `None` when
    /// the ledger cannot be read.
    fn budget_nudges(&self) -> impl Future<Output = Option<HashMap<String, i64>>> + Send;
    /// Resolves when a bus event became owed a wake since the last call.
    fn owed_noted(&self) -> impl Future<Output = ()> + Send;
    fn now_ms(&self) -> i64;
    /// Tells a human (`[notify]`), if the daemon does; never waits.
    fn notify(&self, notice: Notice) {
        let _ = notice;
    }
}

pub struct LiveIo {
    gate: Arc<Gate>,
    store: Store,
    wake_dir: PathBuf,
    /// Where the status lines keep the usage windows (`budget/`).
    state_dir: PathBuf,
    claude: Option<ClaudeHome>,
    restarts: RestartSettings,
    warned: Warnings,
}

impl LiveIo {
    /// `claude` is where Claude Code keeps its session registry; `None` reads no registry.
    pub fn new(
        gate: Arc<Gate>,
        store: Store,
        wake_dir: PathBuf,
        state_dir: PathBuf,
        claude: Option<ClaudeHome>,
        restarts: RestartSettings,
    ) -> Self {
        Self {
            gate,
            store,
            wake_dir,
            state_dir,
            claude,
            restarts,
            warned: Warnings::default(),
        }
    }

    /// Runs a ledger read on a blocking thread; a failure (of the read or of the thread) is
    /// warned about once until a read works again, and reads as `None`.
    async fn read_ledger<T: Send + 'static>(
        &self,
        what: &str,
        read: impl FnOnce() -> Result<T, crate::store::StoreError> + Send + 'static,
    ) -> Option<T> {
        const THEN: &str = "no session is nudged, paid or resumed until the ledger reads again";
        match tokio::task::spawn_blocking(read).await {
            Ok(Ok(value)) => {
                self.warned.clear("ledger read");
                return Some(value);
            }
            Ok(Err(error)) => self.warn_store("ledger read", what, &error, THEN),
            Err(error) => self.warn_store("ledger read", what, &error, THEN),
        }
        None
    }

    fn warn_store(&self, key: &str, what: &str, error: &dyn std::fmt::Display, then: &str) {
        let first = self.warned.first(key);
        crate::warn_or_debug!(first, "nudger: {what} failed: {error}; {then}");
    }
}

impl SessionIo for LiveIo {
    async fn mapping(&self) -> BTreeMap<String, PaneTarget> {
        let dir = self.wake_dir.clone();
        tokio::task::spawn_blocking(move || mapped_panes(&dir))
            .await
            .unwrap_or_default()
    }

    async fn tmux_snapshot(&self) -> Result<HashMap<String, PaneInfo>, MuxError> {
        let tmux = self.gate.injector().tmux();
        let snapshot = tmux.snapshot(Deadline::after(TMUX_BUDGET)).await;
        if let Some(error) = self.warned.first_err("tmux snapshot", &snapshot) {
            tracing::warn!(
                "nudger: tmux list-panes failed ({error}); skipping tmux panes until it works"
            );
        }
        snapshot
    }

    async fn capture(&self, pane: &str) -> Result<String, MuxError> {
        self.gate
            .injector()
            .tmux()
            .capture(pane, Deadline::after(TMUX_BUDGET))
            .await
    }

    async fn session_facts(&self, sessions: Vec<String>) -> Option<HashMap<String, SessionFacts>> {
        let store = self.store.clone();
        self.read_ledger("reading hook facts", move || {
            let mut facts = HashMap::new();
            let rewinds = store.rewinds()?;
            for sid in sessions {
                let rewind = rewinds.facts(&sid);
                let Some(row) = store.session(&sid)? else {
                    continue;
                };
                let hook = row.last_hook_event.clone().zip(row.last_seen_ms);
                let transcript = row
                    .transcript_path
                    .as_deref()
                    .and_then(|p| std::fs::metadata(p).ok())
                    .map(|meta| FileStamp {
                        size: meta.len(),
                        mtime_ms: meta.modified().map(clock::ms).unwrap_or(0),
                    });
                let paused = store.pause(&sid)?.is_some();
                let message_held = inbox::held(
                    row.inbox.as_ref().and_then(InboxRow::unanswered_since),
                    row.transcript_path.as_deref().map(std::path::Path::new),
                );
                facts.insert(
                    sid,
                    SessionFacts {
                        hook,
                        transcript,
                        owed: row.owed,
                        limit: row.limit,
                        rewind,
                        paused,
                        message_held,
                        transcript_path: row.transcript_path.map(PathBuf::from),
                        nudge: row.nudge,
                    },
                );
            }
            Ok(facts)
        })
        .await
    }

    async fn claim_owed(&self, sid: &str) -> Option<u32> {
        // Its budget: an inbox's send, then typing where the inbox refused.
        match self.store.claim_owed(sid, INJECT_BUDGET * 2).await {
            Ok(events) => {
                self.warned.clear("ledger claim");
                Some(events)
            }
            Err(error) => {
                let then = "the owed wake waits for the next poll";
                self.warn_store("ledger claim", "claiming what is owed", &error, then);
                None
            }
        }
    }

    async fn budgets(&self) -> Vec<Account> {
        let dir = self.state_dir.clone();
        tokio::task::spawn_blocking(move || crate::budget::read_all(&dir))
            .await
            .unwrap_or_default()
    }

    async fn last_turn(&self, path: PathBuf) -> Option<Turn> {
        let read = move || {
            let file = std::fs::File::open(&path).ok()?;
            turn::last_turn(&transcript::tail(file, turn::TAIL_BYTES).ok()?)
        };
        tokio::task::spawn_blocking(read).await.ok().flatten()
    }

    async fn registry(&self) -> HashMap<String, RegistryReading> {
        let Some(dir) = self.claude.as_ref().map(ClaudeHome::sessions) else {
            return HashMap::new();
        };
        let Ok(read) = tokio::task::spawn_blocking(move || read_registry(&dir)).await else {
            return HashMap::new();
        };
        if let Some(error) = self.warned.first_err("registry", &read) {
            tracing::warn!("nudger: {error}; deciding without the registry");
        }
        read.unwrap_or_default()
    }

    async fn reached_by_inbox(
        &self,
        live: Vec<String>,
        mapped: Vec<String>,
    ) -> Option<Vec<String>> {
        if !self.gate.inboxes_on() {
            return Some(Vec::new());
        }
        let (store, gate) = (self.store.clone(), self.gate.clone());
        self.read_ledger("listing the sessions with an inbox", move || {
            let kept = store.inbox_candidates(&live, &mapped)?;
            Ok(kept
                .into_iter()
                .filter(|s| gate.inbox(s).is_some())
                .collect())
        })
        .await
    }

    fn busy(&self, sid: &str) -> bool {
        self.gate.is_busy(sid)
    }

    fn last_typed(&self, sid: &str) -> Option<Instant> {
        self.gate.last_typed(sid)
    }

    async fn wake(&self, sid: &str, text: &KeystrokeText, mode: Mode) -> GateOutcome {
        self.gate.wake(sid, text, mode).await
    }

    async fn screen(&self, sid: &str) -> Option<String> {
        self.gate.screen(sid).await
    }

    async fn dismiss_limit_menu(&self, sid: &str) -> Result<bool, InjectError> {
        self.gate.dismiss_limit_menu(sid).await
    }

    async fn restart(&self, restart: Restart) {
        let (settings, store) = (self.restarts.clone(), self.store.clone());
        tokio::spawn(crate::rewind::restart::perform(
            restart,
            settings,
            store,
            self.wake_dir.clone(),
        ));
    }

    fn notify(&self, notice: Notice) {
        self.gate.notices().send(notice);
    }

    async fn record(&self, records: Vec<Record>) {
        for record in records {
            if let Err(error) = self.store.record(record).await {
                let then = "nudge state may not survive a restart";
                self.warn_store("ledger write", "recording a nudge", &error, then);
            }
        }
    }

    async fn budget_nudges(&self) -> Option<HashMap<String, i64>> {
        let store = self.store.clone();
        let read = move || store.last_deliveries_from(super::task::BUDGET_SENDER);
        self.read_ledger("restoring budget nudges", read).await
    }

    async fn owed_noted(&self) {
        self.gate.owed_noted().await;
    }

    fn now_ms(&self) -> i64 {
        clock::now_ms()
    }
}
