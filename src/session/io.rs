//! Everything the session loop reads and writes, behind [`SessionIo`]. [`LiveIo`] is the real
//! one; tests drive the loop with a scripted one on tokio's paused clock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::agent::Agent;
use crate::budget::Account;
use crate::clock;
use crate::context::ContextConfig;
use crate::context::follow::ChangeWatcher;
use crate::context::followed::{Followed, write_state_files};
use crate::context::statusline::feed_dir;
use crate::deadline::Deadline;
use crate::lock;
use crate::mux::{INJECT_BUDGET, InjectError, KeystrokeText, MuxError, PaneInfo};
use crate::reading::hook::HookKind;
use crate::reading::inbox::Inbox;
use crate::reading::registry::{RegistryReading, SessionList};
use crate::reading::transcript::Turn;
use crate::rewind::restart::{Restart, RestartSettings};
use crate::session::gate::{Gate, GateOutcome, Mode};
use crate::session::observe::FileStamp;
use crate::store::{ALL_SESSIONS, InboxRow, Pause, Record, RewindFacts, SessionRow, Store};
use crate::telemetry::notice::Notice;
use crate::telemetry::warn::Warnings;
use crate::wakedir::reader::mapped_panes;
use crate::wakedir::target::PaneTarget;
use crate::wire::session_id::SessionId;

/// Budget of one `list-panes -a` or `capture-pane`: tmux answers in milliseconds; one that
/// takes longer is stuck, and the poll goes on without it.
const TMUX_BUDGET: Duration = Duration::from_secs(2);

/// What the loop's views were made from: the ledger's version ([`Store::version`]) and
/// `panes.json`'s size and modification time. Views are as fresh as a request needs when their
/// ledger version is not older and `panes.json` is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub ledger: u64,
    pub panes: Option<(u64, std::time::SystemTime)>,
}

impl Version {
    /// Now, or `None` when the ledger cannot be read.
    pub fn now(store: &Store, wake_dir: &Path) -> Option<Version> {
        let panes = std::fs::metadata(wake_dir.join(crate::wakedir::PANES_FILE)).ok();
        Some(Version {
            ledger: store.version().ok()?,
            panes: panes.and_then(|m| Some((m.len(), m.modified().ok()?))),
        })
    }

    /// Whether views made from `self` show everything `now` does.
    pub fn covers(&self, now: &Version) -> bool {
        self.ledger >= now.ledger && self.panes == now.panes
    }
}

/// What the ledger holds for the sessions the loop looks at.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pub sessions: BTreeMap<String, SessionFacts>,
    /// Ids given up at a `/clear`: shown as part of the session that has the pane now.
    pub renamed: HashSet<String>,
    /// A pause of every session, while it lasts.
    pub paused_all: Option<Pause>,
}

/// One session as the ledger knows it, with what its files say now.
#[derive(Debug, Clone)]
pub struct SessionFacts {
    /// The ledger's row: the hook's last report, the latest delivery, what is owed and paid, a
    /// usage limit, the nudge series, the inbox.
    pub row: SessionRow,
    /// Its transcript's size and mtime now.
    pub transcript: Option<FileStamp>,
    pub rewind: RewindFacts,
    /// The pause a person put it under (its own, else every session's), while it lasts.
    pub pause: Option<Pause>,
    /// Its agent holds the last message to its inbox for a human (`Side::holds_for_a_person`).
    pub message_held: bool,
    /// Its inbox as the gate would use it now (`Ok(None)`: it has none; `Err`: why not).
    pub inbox: Result<Option<Inbox>, String>,
}

impl Default for SessionFacts {
    fn default() -> Self {
        Self {
            row: SessionRow::default(),
            transcript: None,
            rewind: RewindFacts::default(),
            pause: None,
            message_held: false,
            inbox: Ok(None),
        }
    }
}

impl SessionFacts {
    /// The last hook event and when the hook last reported (unix ms).
    pub fn hook(&self) -> Option<(HookKind, i64)> {
        let event = self.row.last_hook_event.as_deref()?;
        Some((HookKind::of_recorded(event), self.row.last_seen_ms?))
    }

    pub fn inbox_live(&self) -> bool {
        matches!(self.inbox, Ok(Some(_)))
    }
}

pub trait SessionIo: Send + Sync {
    /// Session id → pane, from `panes.json` (invalid entries left out).
    fn mapping(&self) -> impl Future<Output = BTreeMap<String, PaneTarget>> + Send;
    fn tmux_snapshot(
        &self,
    ) -> impl Future<Output = Result<HashMap<String, PaneInfo>, MuxError>> + Send;
    fn capture(&self, pane: &str) -> impl Future<Output = Result<String, MuxError>> + Send;
    /// The ledger's facts of every session it knows (`only`: of these), each inbox checked with
    /// the `registry`'s as the second source; `None` when the ledger cannot be read.
    fn ledger(
        &self,
        only: Option<Vec<String>>,
        registry: &HashMap<String, RegistryReading>,
    ) -> impl Future<Output = Option<Ledger>> + Send;
    /// Claims what `sid` is owed for the wake about to be sent, so its Stop hook leaves the debt
    /// to it (`Store::claim_owed`): how many events; `None` when the ledger cannot be written.
    fn claim_owed(&self, sid: &str) -> impl Future<Output = Option<u32>> + Send;
    fn registry(&self) -> impl Future<Output = HashMap<String, RegistryReading>> + Send;
    /// Every account's usage windows as the status lines last reported them.
    fn budgets(&self) -> impl Future<Output = Vec<Account>> + Send;
    /// The newest turn of `agent`'s transcript at `path`.
    fn last_turn(&self, agent: Agent, path: PathBuf) -> impl Future<Output = Option<Turn>> + Send;
    /// Brings each session's context up to date from its transcript and feed (`full`: finding
    /// transcripts not followed yet) and writes the state files; each comes back with the
    /// usage-limit records its files showed.
    fn follow(
        &self,
        sessions: Vec<(String, Followed)>,
        full: bool,
    ) -> impl Future<Output = Vec<(String, Followed, Vec<Record>)>> + Send;
    /// Resolves once a session's transcript or status-line feed changed.
    fn changed(&self) -> impl Future<Output = ()> + Send;
    fn busy(&self, sid: &str) -> bool;
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
    /// What the views would be made from now: another version means something was committed
    /// to the ledger or `panes.json` changed since; `None` when the ledger cannot be read.
    fn version(&self) -> Option<Version>;
    fn now_ms(&self) -> i64;
    /// Tells a human (`[notify]`), if the daemon does; never waits.
    fn notify(&self, notice: Notice) {
        let _ = notice;
    }
    /// A full tick is over: what it read and rendered for every session was freed.
    fn rested(&self) {}
}

pub struct LiveIo {
    gate: Arc<Gate>,
    store: Store,
    wake_dir: PathBuf,
    registry: Option<Arc<dyn SessionList>>,
    restarts: RestartSettings,
    /// Its `state_dir` is also where the status lines keep the usage windows (`budget/`).
    context: ContextConfig,
    /// Change notification for the followed transcripts' directories and the feed directory.
    watcher: tokio::sync::Mutex<ChangeWatcher>,
    /// The directories watched, and the session whose state file is the "latest" one.
    watching: Mutex<(HashSet<PathBuf>, Option<String>)>,
    warned: Warnings,
}

impl LiveIo {
    /// `registry` is the agent's list of its live sessions; `None` reads none.
    pub fn new(
        gate: Arc<Gate>,
        store: Store,
        wake_dir: PathBuf,
        registry: Option<Arc<dyn SessionList>>,
        restarts: RestartSettings,
        context: ContextConfig,
    ) -> Self {
        Self {
            gate,
            store,
            wake_dir,
            registry,
            restarts,
            watcher: tokio::sync::Mutex::new(ChangeWatcher::new(context.poll_interval)),
            context,
            watching: Mutex::default(),
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
        crate::warn_or_debug!(first, "session loop: {what} failed: {error}; {then}");
    }

    /// Watches the directories of the followed transcripts and the feed directory not watched
    /// yet (a directory that does not exist yet is tried again next time).
    async fn watch(&self, followed: &[(String, Followed, Vec<Record>)]) {
        let mut dirs: Vec<PathBuf> = (followed.iter())
            .filter_map(|(_, f, _)| f.transcript()?.parent().map(Path::to_owned))
            .chain([feed_dir(&self.context.state_dir)])
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs.retain(|d| !lock(&self.watching).0.contains(d) && d.is_dir());
        let mut watcher = self.watcher.lock().await;
        for dir in dirs {
            match watcher.watch_dir(&dir) {
                Ok(()) => drop(lock(&self.watching).0.insert(dir)),
                Err(e) => tracing::debug!(error = %e, "transcripts are polled instead"),
            }
        }
    }
}

/// A session's facts from its ledger row: its transcript's stamp, its rewinds, its pause, and
/// its inbox as the gate would use it now. Blocking I/O.
pub(crate) fn facts_of(
    row: SessionRow,
    rewind: RewindFacts,
    pause: Option<Pause>,
    gate: &Gate,
    registered: Option<Inbox>,
) -> SessionFacts {
    let path = row.transcript_path.as_deref().map(Path::new);
    let transcript = path
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|meta| FileStamp {
            size: meta.len(),
            mtime_ms: meta.modified().map(clock::ms).unwrap_or(0),
        });
    let unanswered = row.inbox.as_ref().and_then(InboxRow::unanswered_since);
    let message_held = row.agent.side().holds_for_a_person(unanswered, path);
    let sid = &row.session_id;
    let inbox = gate.reach_from(sid, row.inbox.as_ref(), registered, || message_held);
    let announced = (row.inbox.as_ref()).is_some_and(|r| r.inbox.is_some() || r.sent_ms.is_some());
    let inbox = match inbox {
        Ok(None) if announced && !gate.inboxes_on() => {
            Err("inboxes are off ([wake] inbox = false)".to_owned())
        }
        Ok(None) if announced => {
            Err("no inbox announced by its hooks or its agent's session list".to_owned())
        }
        reach => reach.map_err(|why| why.to_string()),
    };
    SessionFacts {
        transcript,
        rewind,
        pause,
        message_held,
        inbox,
        row,
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
                "session loop: tmux list-panes failed ({error}); skipping tmux panes until it works"
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

    async fn ledger(
        &self,
        only: Option<Vec<String>>,
        registry: &HashMap<String, RegistryReading>,
    ) -> Option<Ledger> {
        let (store, gate) = (self.store.clone(), self.gate.clone());
        let registered: HashMap<String, Inbox> = (registry.iter())
            .filter_map(|(sid, r)| Some((sid.clone(), r.inbox.clone()?)))
            .collect();
        self.read_ledger("reading the sessions", move || {
            let rows = match &only {
                None => store.sessions()?,
                Some(ids) => (ids.iter())
                    .filter_map(|sid| store.session(sid).transpose())
                    .collect::<Result<_, _>>()?,
            };
            let rewinds = store.rewinds()?;
            let pauses = store.pauses(clock::now_ms())?;
            let paused_all = pauses.get(ALL_SESSIONS).copied();
            let mut ledger = Ledger {
                renamed: (rows.iter())
                    .map(|r| r.session_id.clone())
                    .filter(|sid| rewinds.renamed(sid))
                    .collect(),
                paused_all,
                sessions: BTreeMap::new(),
            };
            for row in rows {
                let sid = row.session_id.clone();
                let pause = pauses.get(&sid).copied().or(paused_all);
                let registered = registered.get(&sid).cloned();
                let facts = facts_of(row, rewinds.facts(&sid), pause, &gate, registered);
                ledger.sessions.insert(sid, facts);
            }
            Ok(ledger)
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
        let dir = self.context.state_dir.clone();
        tokio::task::spawn_blocking(move || crate::budget::read_all(&dir))
            .await
            .unwrap_or_default()
    }

    async fn last_turn(&self, agent: Agent, path: PathBuf) -> Option<Turn> {
        let read = move || agent.side().last_turn(&path);
        tokio::task::spawn_blocking(read).await.ok().flatten()
    }

    async fn follow(
        &self,
        sessions: Vec<(String, Followed)>,
        full: bool,
    ) -> Vec<(String, Followed, Vec<Record>)> {
        let config = self.context.clone();
        let mut latest = lock(&self.watching).1.clone();
        let read = move || {
            let mut followed: Vec<(String, Followed, Vec<Record>)> = (sessions.into_iter())
                .map(|(sid, mut f)| {
                    let seen = f.refresh(&sid, &config, full);
                    (sid, f, seen)
                })
                .collect();
            let each = followed.iter_mut().map(|(sid, f, _)| (sid.as_str(), f));
            write_state_files(each, &config, &mut latest);
            (followed, latest)
        };
        let Ok((followed, latest)) = tokio::task::spawn_blocking(read).await else {
            tracing::error!("session loop: reading the transcripts failed");
            return Vec::new();
        };
        lock(&self.watching).1 = latest;
        self.watch(&followed).await;
        followed
    }

    async fn changed(&self) {
        let feeds = feed_dir(&self.context.state_dir);
        loop {
            let paths = self.watcher.lock().await.next().await;
            let mut named = (paths.iter()).filter_map(|path| {
                let name = path.file_name()?.to_str()?;
                match path.parent() == Some(feeds.as_path()) {
                    true => name.strip_suffix(".json"),
                    false => name.strip_suffix(".jsonl"),
                }
            });
            if named.any(SessionId::is_valid) {
                return;
            }
        }
    }

    async fn registry(&self) -> HashMap<String, RegistryReading> {
        let Some(list) = self.registry.clone() else {
            return HashMap::new();
        };
        let Ok(read) = tokio::task::spawn_blocking(move || list.read()).await else {
            return HashMap::new();
        };
        if let Some(error) = self.warned.first_err("registry", &read) {
            tracing::warn!("session loop: {error}; deciding without the registry");
        }
        read.unwrap_or_default()
    }

    fn busy(&self, sid: &str) -> bool {
        self.gate.is_busy(sid)
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
        self.gate.notify(notice);
    }

    async fn record(&self, records: Vec<Record>) {
        for record in records {
            if let Err(error) = self.store.record(record).await {
                let then = "the session's state may not survive a restart";
                self.warn_store("ledger write", "recording", &error, then);
            }
        }
    }

    async fn budget_nudges(&self) -> Option<HashMap<String, i64>> {
        let store = self.store.clone();
        let read = move || store.last_deliveries_from(super::task::BUDGET_SENDER);
        self.read_ledger("restoring budget nudges", read).await
    }

    fn version(&self) -> Option<Version> {
        Version::now(&self.store, &self.wake_dir)
    }

    /// Gives the allocator's free pages back: a tick reads and renders every session on more
    /// than one thread, and glibc keeps what was freed mapped, in the middle of its heap too
    /// (1,000 sessions: 21.5 MiB at rest without, docs/benchmarks.md). A few hundred µs.
    fn rested(&self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only returns free memory to the system; it touches no live block.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    fn now_ms(&self) -> i64 {
        clock::now_ms()
    }
}
