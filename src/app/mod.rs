//! `serve`: prepare the wake dir, take the singleton locks, bind, start the background tasks,
//! serve, then stop in order. Tests call `App::build` too, so they run what users run.

pub(crate) mod singleton;
mod validated;
use crate::clock;
use crate::rewind::restart::RestartSettings;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};
pub use validated::Validated;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::Action;
use crate::bus::registration::{self, RegistrationConfig, RegistrationStatus};
use crate::claude::registry::Registry;
use crate::config::{Backend, Env};
use crate::delivery::Deliverer;
use crate::delivery::dedupe::Dedupe;
use crate::fleet::Fleet;
use crate::http::AppState;
use crate::mux::{Injector, MuxConfig};
use crate::notify::NotifyConfig;
use crate::reading::registry::SessionList;
use crate::session::Sessions;
use crate::session::gate::Gate;
use crate::session::task::{self as keeper, Keeper, LiveIo};
use crate::spool::prune;
use crate::spool::{self, Spool};
use crate::store::{Store, StoreError};
use crate::telemetry::notice::{Notice, Notices};
use crate::telemetry::warn::Warnings;
use crate::wakedir::reader::mapped_panes;
use crate::wire::session_id::SessionId;
use singleton::{SingletonError, Singletons};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot prepare wake dir {dir} (--wake-dir / AGENT_EVENT_BUS_WAKE_DIR): {source}")]
    WakeDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Singleton(#[from] SingletonError),
    #[error(transparent)]
    Spool(spool::OpenError),
    #[error("cannot listen on {addr}: {source}; pick a free --port or stop whatever holds it")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Ledger(#[from] StoreError),
    #[error("server failed: the spool's recovery stopped: {0}")]
    Recovery(#[source] tokio::task::JoinError),
    #[error("server failed: {0}")]
    Serve(#[source] std::io::Error),
    #[error("cannot join the fleet: {0}")]
    Fleet(#[source] crate::bus::BusError),
}

impl AppError {
    /// 2 when a restart cannot help (a human must fix something), 1 when it may.
    pub fn exit_code(&self) -> u8 {
        match self {
            AppError::WakeDir { .. } | AppError::Ledger(_) | AppError::Fleet(_) => 2,
            AppError::Spool(e) if !e.restart_may_help() => 2,
            AppError::Singleton(_)
            | AppError::Spool(_)
            | AppError::Bind { .. }
            | AppError::Recovery(_)
            | AppError::Serve(_) => 1,
        }
    }
}

/// A built daemon: locks held, listener bound, not yet serving.
pub struct App {
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    keeper: Keeper<LiveIo>,
    notify: Option<(NotifyConfig, tokio::sync::mpsc::Receiver<Notice>)>,
    _singletons: Singletons,
}

impl App {
    pub async fn build(settings: Validated, env: &Env) -> Result<App, AppError> {
        let Validated {
            config,
            notify,
            sessions: session_config,
            launch,
            fleet,
        } = settings;
        let wake_err = |source| AppError::WakeDir {
            dir: config.paths.wake_dir.clone(),
            source,
        };
        crate::wakedir::ensure_wake_dir(&config.paths.wake_dir).map_err(wake_err)?;
        let wake_dir = std::fs::canonicalize(&config.paths.wake_dir).map_err(wake_err)?;
        let singletons = singleton::acquire(env, &config.hook_url, &wake_dir)?;
        raise_descriptor_limit();
        // Before anything can append: what a crash cut from the spools is put back here.
        let spool_options = spool::SpoolOptions {
            checkpoint_every: config.settings.spool.sync_interval,
            ..spool::SpoolOptions::default()
        };
        let store = Store::open(&config.paths.ledger)?;
        let spool = {
            // Recovery reads and syncs files and waits for the ledger: off the async workers.
            let (dir, store) = (wake_dir.clone(), store.clone());
            tokio::task::spawn_blocking(move || Spool::open(dir, store, spool_options))
                .await
                .map_err(AppError::Recovery)?
                .map_err(AppError::Spool)?
        };
        let mux = MuxConfig::from_settings(&config.settings.mux);
        if config.backend == Backend::Mux {
            preflight_multiplexers(&mux, env);
        }
        let addr = SocketAddr::new(config.topology.bind, config.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| AppError::Bind { addr, source })?;
        for warning in &config.topology.warnings {
            tracing::warn!("{warning}");
        }
        crate::telemetry::start_at_zero(
            <Action as strum::IntoEnumIterator>::iter().map(Action::as_str),
            crate::http::ApiError::reasons(),
            crate::mux::InjectError::kinds()
                .chain(spool::SpoolError::KINDS.iter().copied())
                .chain(crate::reading::inbox::InboxError::KINDS.iter().copied()),
        );
        let injector = Arc::new(Injector::new(&mux));
        let (notices, notify) = match notify {
            Some(notify) => {
                let (notices, queue) = Notices::channel();
                (notices, Some((notify, queue)))
            }
            None => (Notices::default(), None),
        };
        let sessions = Arc::new(Sessions::default());
        let gate = Gate::new(
            wake_dir.clone(),
            config.busy_ttl,
            config.cooldown,
            injector,
            store.clone(),
            config.settings.limits.enabled,
            sessions.clone(),
        )
        .with_notices(notices, config.settings.notify.min_gap);
        let registry = (config.paths.claude.as_ref().ok()).map(|claude| {
            Arc::new(Registry {
                dir: claude.sessions(),
            }) as Arc<dyn SessionList>
        });
        let gate = Arc::new(match config.settings.wake.inbox {
            true => gate.with_inboxes(registry.clone()),
            false => gate,
        });
        let dedupe = Dedupe::new(config.settings.ledger.identity_window);
        restore_state(
            &store,
            &gate,
            &dedupe,
            config.settings.ledger.identity_window,
        );
        let restarts = RestartSettings {
            command: launch.command,
            timeout: launch.timeout,
            claude_home: config.paths.claude.as_ref().ok().cloned(),
            mux: mux.clone(),
        };
        let io = LiveIo::new(
            gate.clone(),
            store.clone(),
            wake_dir.clone(),
            registry,
            restarts,
            session_config.context.clone(),
        );
        let views = watch::Sender::new(Default::default());
        let keeper = Keeper::new(session_config, io, sessions.clone(), views);
        let fleet = (fleet.map(|fleet| Fleet::new(fleet, &config.bus_url, store.clone())))
            .transpose()
            .map_err(AppError::Fleet)?;
        let deliverer = Deliverer::new(spool, config.backend, config.scope, gate, store, dedupe);
        let state = Arc::new(AppState {
            deliverer: Arc::new(deliverer),
            rejections: Warnings::default(),
            unsafe_ids: Warnings::default(),
            level_notice_armed: AtomicBool::new(true),
            started_at: SystemTime::now(),
            registration: config
                .settings
                .registration
                .enabled
                .then(|| Arc::new(RegistrationStatus::default())),
            views: keeper.views(),
            sessions,
            fleet,
            config,
            stopping: CancellationToken::new(),
        });
        Ok(App {
            state,
            listener,
            keeper,
            notify,
            _singletons: singletons,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::new(self.state.config.topology.bind, 0))
    }

    /// Serves until `shutdown`, then lets in-flight requests finish.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), AppError> {
        let addr = self.local_addr();
        tracing::info!(%addr, backend = ?self.state.config.backend, wake_dir = %self.state.deliverer.spool().wake_dir().display(), "wakebridge listening");
        // The two keepers (the bridge's webhook, the fleet's) share their listing.
        let listing = Arc::new(registration::SharedListing::default());
        let registration = self.state.registration.clone().map(|status| {
            let config = &self.state.config;
            let reg = RegistrationConfig {
                what: "bridge webhook",
                bus_url: config.bus_url.clone(),
                hook_url: config.hook_url.clone(),
                channel: crate::bus::SESSION_CHANNEL.to_owned(),
                secret: config.secret.clone(),
                keep_interval: config.settings.registration.keep_interval,
                listing: listing.clone(),
            };
            tokio::spawn(registration::run(reg, status, shutdown.child_token()))
        });
        let fleet = self.state.fleet.clone().map(|fleet| {
            let config = &self.state.config;
            fleet.set_performer(crate::http::fleet::performer(Arc::downgrade(&self.state)));
            // The same keeper keeps the fleet's webhook, where the bridge's is kept.
            let webhook = (self.state.registration.is_some()).then(|| {
                let reg = RegistrationConfig {
                    what: "fleet webhook",
                    bus_url: config.bus_url.clone(),
                    hook_url: crate::fleet::webhook_url(&config.hook_url),
                    channel: crate::fleet::command::command_channel(&fleet.config.machine),
                    secret: config.secret.clone(),
                    keep_interval: config.settings.registration.keep_interval,
                    listing: listing.clone(),
                };
                let status = fleet.webhook.clone();
                tokio::spawn(registration::run(reg, status, shutdown.child_token()))
            });
            let sources = crate::fleet::Sources {
                views: self.state.views.clone(),
                state_dir: config.paths.state_dir.clone(),
                budget_stale_after: config.settings.budget.stale_after,
                catch_up_every: config.settings.registration.keep_interval,
            };
            let run = tokio::spawn(crate::fleet::run(fleet, sources, shutdown.child_token()));
            (run, webhook)
        });
        let (fleet, fleet_webhook) = fleet.unzip();
        let fleet_webhook = fleet_webhook.flatten();
        let pruning = spawn_pruning(&self.state, shutdown.child_token());
        let sampler = crate::http::history::spawn_sampler(&self.state, shutdown.child_token());
        let keeper = tokio::spawn(keeper::run(self.keeper, shutdown.child_token()));
        let notify = self.notify.map(|(config, queue)| {
            tokio::spawn(crate::notify::task::run(
                config,
                self.state.config.bus_url.clone(),
                self.state.deliverer.store().clone(),
                queue,
                shutdown.child_token(),
            ))
        });
        let router = crate::http::router(self.state.clone());
        let stop = shutdown.clone();
        let stopping = self.state.stopping.clone();
        axum::serve(self.listener, router)
            .with_graceful_shutdown(async move {
                stop.cancelled().await;
                stopping.cancel();
            })
            .await
            .map_err(AppError::Serve)?;
        // Registration (last) unregisters our row within its own bounded budget.
        for task in [
            Some(pruning),
            Some(sampler),
            Some(keeper),
            notify,
            fleet,
            fleet_webhook,
            registration,
        ]
        .into_iter()
        .flatten()
        {
            let _ = task.await;
        }
        // Sync every session file and clear the ledger's pending rounds: nothing to replay next.
        let state = self.state.clone();
        let _ = tokio::task::spawn_blocking(move || state.deliverer.spool().close()).await;
        tracing::info!("wakebridge stopped");
        Ok(())
    }
}

fn spawn_pruning(state: &Arc<AppState>, shutdown: CancellationToken) -> JoinHandle<()> {
    let settings = state.config.settings.prune.clone();
    let wake_dir = state.deliverer.spool().wake_dir().to_path_buf();
    let (interval, max_age) = (settings.interval, settings.max_age);
    let window = state.config.settings.ledger.identity_window;
    let state = state.clone();
    tokio::spawn(async move {
        let spools = tokio::spawn(prune::run(wake_dir, settings, shutdown.clone()));
        let mut tick = tokio::time::interval(interval);
        while shutdown.run_until_cancelled(tick.tick()).await.is_some() {
            state.deliverer.dedupe().expire();
            let cutoff = clock::now_ms() - window.as_millis() as i64;
            match state.deliverer.store().prune_older_than(cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    rows = n,
                    "pruned ledger rows older than the identity window"
                ),
                Err(e) => tracing::warn!(error = %e, "could not prune the ledger"),
            }
            forget_dropped_sessions(&state, max_age).await;
            let history = clock::duration_ms(state.config.settings.page.history);
            let store = state.deliverer.store();
            if let Err(e) = store.prune_samples_before(clock::now_ms() - history).await {
                tracing::warn!(error = %e, "could not prune the page's history");
            }
        }
        let _ = spools.await;
    })
}

/// Forgets the ledger rows and state files of sessions unmapped and gone for `max_age`.
async fn forget_dropped_sessions(state: &AppState, max_age: Duration) {
    let wake_dir = state.deliverer.spool().wake_dir();
    let mapped: Vec<String> = mapped_panes(wake_dir).into_keys().collect();
    let cutoff = clock::now_ms() - clock::duration_ms(max_age);
    match state
        .deliverer
        .store()
        .forget_sessions_before(cutoff, mapped)
        .await
    {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            sessions = n,
            "forgot sessions not seen for the spools' age limit"
        ),
        Err(e) => tracing::warn!(error = %e, "could not forget old sessions in the ledger"),
    }
    let state_dir = state.config.paths.state_dir.clone();
    let removed = tokio::task::spawn_blocking(move || {
        let now = SystemTime::now();
        let context = crate::context::statefile::states_dir(&state_dir);
        let feed = crate::context::statusline::feed_dir(&state_dir);
        let mut removed = prune::prune_old_files(&context, now, max_age, SessionId::is_valid);
        removed.extend(prune::prune_old_files(&feed, now, max_age, |name| {
            name.strip_suffix(".json").is_some_and(SessionId::is_valid)
        }));
        removed.len()
    })
    .await
    .unwrap_or(0);
    if removed > 0 {
        tracing::info!(
            files = removed,
            "pruned state files of sessions gone for the spools' age limit"
        );
    }
}

/// Reads back the window's event identities (a redelivery is still known) and recent wakes.
fn restore_state(store: &Store, gate: &Gate, dedupe: &Dedupe, window: Duration) {
    let now = clock::now_ms();
    let ago = |at_ms: i64| Duration::from_millis(now.saturating_sub(at_ms).max(0) as u64);
    let started = std::time::Instant::now();
    let since = now.saturating_sub(clock::duration_ms(window));
    // Oldest first: a later delivery of the same identity replaces the earlier one.
    let restored = store.each_identity_since(since, |seen| {
        if let Ok(action) = seen.action.parse::<Action>() {
            dedupe.restore(seen.identity, action, ago(seen.at_ms));
        }
    });
    match restored {
        Ok(0) => {}
        Ok(rows) => tracing::info!(
            rows,
            remembered = dedupe.remembered(),
            ms = started.elapsed().as_millis() as u64,
            "restored the event identities of the identity window from the ledger"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "could not read recent event identities from the ledger; a redelivery of an event delivered before this start may be appended again");
        }
    }
    match store.last_wakes() {
        Ok(wakes) => {
            for (sid, at_ms) in wakes {
                gate.restore_wake(&sid, ago(at_ms));
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not read recent wakes from the ledger"),
    }
}

/// glibc gives each thread that allocates an arena of its own (up to eight a core), and what a
/// thread frees stays in its arena: with the session loop's reads on blocking threads, 1,000
/// sessions held 39 MiB at rest instead of 21 in one arena (docs/benchmarks.md, "Sessions at
/// rest"). Each thread's cache still serves small allocations without the arena's lock.
/// `MALLOC_ARENA_MAX` in the environment, which glibc reads itself, wins. Called first.
pub fn limit_malloc_arenas(env: &Env) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if env.get("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only tunes the allocator, and M_ARENA_MAX takes any positive count;
        // a refusal (0) leaves glibc's default.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

/// Lifts the soft descriptor limit (often 1024: connections and spool files) to the hard one.
fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0
        || limit.rlim_cur >= limit.rlim_max
    {
        return;
    }
    let wanted = libc::rlimit {
        rlim_cur: limit.rlim_max,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads only the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) } != 0 {
        let soft = limit.rlim_cur;
        tracing::debug!("could not raise the open-file limit; keeping {soft}");
    }
}

/// Warns (a refusal would crash-loop under a supervisor) when no multiplexer is on PATH.
fn preflight_multiplexers(config: &MuxConfig, env: &Env) {
    let found = crate::mux::preflight_for(config, env);
    if found.is_empty() {
        tracing::warn!(
            "none of tmux, zellij is on PATH: wakes will report spool-mux-failed; a supervisor's minimal PATH may be the cause (see deploy/)"
        );
    } else {
        tracing::info!("Wake injection available via: {}", found.join(", "));
    }
}
