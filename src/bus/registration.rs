//! The registration keeper: exactly one webhook row on the bus at our hook URL while `serve` runs.
//! It sweeps rows at our exact URL (paused ones too), registers with a capped backoff, re-lists
//! every `keep_interval` to replace a row deleted or paused, and removes it at shutdown within a
//! fixed budget. A daemon keeps two rows (the bridge's `/hook`, the fleet's `/fleet/hook`), one
//! keeper each; their periodic checks share one listing (`SharedListing`).

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};
use url::{Host, Url};

use crate::bus::{BusClient, BusError, WebhookRow};
use crate::deadline::Deadline;
use crate::telemetry::warn::Warnings;
use crate::wire::signature::Secret;

pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// Longest retry delay: the reference bridge's cap, so a bus started late is found within 30 s.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// Everything shutdown may spend on the bus, well under the supervisors' stop timeouts: a hung
/// bus can only leak a row (the next sweep reclaims it), never hold the process.
pub const SHUTDOWN_BUDGET: Duration = Duration::from_secs(5);

/// The retry delay after `attempt` consecutive failures (0-based): 1, 2, 4, 8, 16, 30, 30, ... s.
pub fn backoff(attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
    BACKOFF_FIRST.saturating_mul(factor).min(BACKOFF_CAP)
}

/// `other` looks like an older registration of ours (another port or loopback alias): warned
/// about, never swept, since another bridge may listen there.
pub fn looks_like_ours(hook_url: &Url, other: &str) -> bool {
    let Ok(other) = Url::parse(other) else {
        return false;
    };
    if other.as_str() == hook_url.as_str() || other.path() != hook_url.path() {
        return false;
    }
    let (Some(our_host), Some(their_host)) = (hook_url.host(), other.host()) else {
        return false;
    };
    let same_port = other.port_or_known_default() == hook_url.port_or_known_default();
    if our_host == their_host {
        return !same_port;
    }
    same_port && is_loopback(&our_host) && is_loopback(&their_host)
}

fn is_loopback(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistrationSnapshot {
    /// The last check (a registration, or a keeper listing) found our row present and active.
    pub registered: bool,
    /// Kept while the bus is unreachable.
    pub webhook_id: Option<i64>,
    pub last_verified_at: Option<SystemTime>,
}

/// Shared registration state: written by the keeper, read by `/health` without waiting.
#[derive(Debug, Default)]
pub struct RegistrationStatus {
    state: watch::Sender<RegistrationSnapshot>,
}

impl RegistrationStatus {
    pub fn snapshot(&self) -> RegistrationSnapshot {
        self.state.borrow().clone()
    }

    fn record_verified(&self, id: i64) {
        self.state.send_modify(|s| {
            s.registered = true;
            s.webhook_id = Some(id);
            s.last_verified_at = Some(SystemTime::now());
        });
    }

    fn record_unverified(&self, id: Option<i64>) {
        self.state.send_modify(|s| {
            s.registered = false;
            s.webhook_id = id;
        });
    }

    /// Hands the held id over exactly once (to the shutdown unregister).
    fn take_id(&self) -> Option<i64> {
        let mut taken = None;
        self.state.send_modify(|s| {
            s.registered = false;
            taken = s.webhook_id.take();
        });
        taken
    }
}

/// A `list_webhooks` answer the keepers of one daemon share: a periodic check takes one another
/// keeper made within the keep interval, or waits for the one it is making, so two rows cost
/// one call a keep interval. Every registration or removal by any of them drops it, so a keeper
/// never misses its own row; a row someone else deleted or paused is seen within two keep
/// intervals instead of one.
#[derive(Debug, Default)]
pub struct SharedListing(tokio::sync::Mutex<Option<(tokio::time::Instant, Vec<WebhookRow>)>>);

impl SharedListing {
    /// A listing made within `within`, else `list`'s, kept for the others; and whether it is
    /// `list`'s. One keeper lists at a time: the other waits and takes what it got.
    async fn get(
        &self,
        within: Duration,
        list: impl Future<Output = Result<Vec<WebhookRow>, BusError>>,
    ) -> Result<(Vec<WebhookRow>, bool), BusError> {
        let mut kept = self.0.lock().await;
        if let Some((at, rows)) = kept.as_ref()
            && at.elapsed() < within
        {
            return Ok((rows.clone(), false));
        }
        let rows = list.await?;
        *kept = Some((tokio::time::Instant::now(), rows.clone()));
        Ok((rows, true))
    }

    async fn forget(&self) {
        *self.0.lock().await = None;
    }
}

#[derive(Clone, Debug)]
pub struct RegistrationConfig {
    /// What the row is, for the log: "bridge webhook", "fleet webhook".
    pub what: &'static str,
    pub bus_url: String,
    /// The URL registered, and the exact-match key of the sweep.
    pub hook_url: String,
    /// The channel prefix the row asks the bus for.
    pub channel: String,
    pub secret: Option<Secret>,
    pub keep_interval: Duration,
    /// The listing this keeper's checks share with the daemon's other keeper.
    pub listing: Arc<SharedListing>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowState {
    Present,
    Paused,
    Gone,
}

/// Registers, keeps the registration true, and unregisters on shutdown; returns after that.
pub async fn run(
    config: RegistrationConfig,
    status: Arc<RegistrationStatus>,
    shutdown: CancellationToken,
) {
    let client = match BusClient::new(&config.bus_url) {
        Ok(client) => client,
        Err(e) => {
            error!("Bus registration disabled: {e}");
            shutdown.cancelled().await;
            return;
        }
    };
    let hook_url = Url::parse(&config.hook_url).ok();
    let keeper = Keeper {
        client,
        config,
        hook_url,
        status,
        shutdown,
        shutdown_deadline: OnceLock::new(),
    };
    keeper.keep().await;
    keeper.unregister_on_shutdown().await;
}

struct Keeper {
    client: BusClient,
    config: RegistrationConfig,
    /// For the look-alike check (skipped when it does not parse).
    hook_url: Option<Url>,
    status: Arc<RegistrationStatus>,
    shutdown: CancellationToken,
    /// Started the first time shutdown work needs a budget; shared by every step after it.
    shutdown_deadline: OnceLock<Deadline>,
}

impl Keeper {
    async fn keep(&self) {
        let warned_lookalikes = Warnings::default();
        'register: loop {
            let Some(id) = self.register_with_retry(&warned_lookalikes).await else {
                return;
            };
            self.status.record_verified(id);
            let mut failures: u32 = 0;
            loop {
                let keep = self.config.keep_interval;
                let wait = failures.checked_sub(1).map_or(keep, backoff).min(keep);
                if self.cancellable(tokio::time::sleep(wait)).await.is_none() {
                    return;
                }
                let Some(checked) = self.cancellable(self.check(id, &warned_lookalikes)).await
                else {
                    return;
                };
                match checked {
                    Ok(RowState::Present) => {
                        failures = 0;
                        self.status.record_verified(id);
                    }
                    Ok(RowState::Gone) => {
                        let what = self.config.what;
                        warn!(
                            webhook_id = id,
                            "The {what} #{id} is gone from the bus; registering again"
                        );
                        self.status.record_unverified(None);
                        continue 'register;
                    }
                    Ok(RowState::Paused) => {
                        let what = self.config.what;
                        warn!(
                            webhook_id = id,
                            "The {what} #{id} is paused on the bus; replacing it with an active one"
                        );
                        self.status.record_unverified(Some(id));
                        continue 'register;
                    }
                    Err(e) => {
                        self.status.record_unverified(Some(id));
                        let delay = backoff(failures).min(self.config.keep_interval);
                        warn!(
                            webhook_id = id,
                            "Could not verify {} #{id}: {e}; retrying in {}s",
                            self.config.what,
                            delay.as_secs_f64()
                        );
                        failures = failures.saturating_add(1);
                    }
                }
            }
        }
    }

    /// Sweeps and registers until it works; `None` once shutdown interrupts it.
    async fn register_with_retry(&self, warned: &Warnings) -> Option<i64> {
        let mut failures: u32 = 0;
        loop {
            if self.shutdown.is_cancelled() {
                return None;
            }
            match self.attempt(warned).await? {
                Ok(id) => {
                    info!(
                        webhook_id = id,
                        "Registered {} #{id} on {}", self.config.what, self.config.bus_url
                    );
                    return Some(id);
                }
                Err(e) => {
                    let delay = backoff(failures);
                    warn!(
                        "Bus registration failed: {e}; retrying in {}s",
                        delay.as_secs()
                    );
                    failures = failures.saturating_add(1);
                    self.cancellable(tokio::time::sleep(delay)).await?;
                }
            }
        }
    }

    /// One sweep-then-register; `None` once shutdown interrupts it. A register already sent at
    /// shutdown gets the shutdown budget, so the row it may have created can be removed.
    async fn attempt(&self, warned: &Warnings) -> Option<Result<i64, BusError>> {
        if let Err(e) = self.cancellable(self.sweep(None, warned)).await? {
            return Some(Err(e));
        }
        if self.shutdown.is_cancelled() {
            return None;
        }
        let register = self.client.register_webhook(
            &self.config.hook_url,
            &self.config.channel,
            self.config.secret.as_ref().map(Secret::expose),
        );
        tokio::pin!(register);
        let registered = tokio::select! {
            biased;
            result = &mut register => Some(result),
            () = self.shutdown.cancelled() => {
                let budget = self.shutdown_deadline().remaining();
                tokio::time::timeout(budget, register).await.ok()
            }
        };
        self.config.listing.forget().await;
        registered
    }

    /// Lists the bus (or takes the listing another keeper just made) and says what became of
    /// our row, removing duplicates at our exact URL.
    async fn check(&self, id: i64, warned: &Warnings) -> Result<RowState, BusError> {
        let listing = &self.config.listing;
        let (rows, listed) = listing
            .get(self.config.keep_interval, self.client.list_webhooks())
            .await?;
        if listed {
            self.warn_about_lookalikes(&rows, warned);
        }
        self.remove_stale(&rows, Some(id)).await?;
        let ours = rows.iter().find(|row| {
            row.webhook_id == Some(id) && row.url.as_deref() == Some(&self.config.hook_url)
        });
        Ok(match ours {
            None => RowState::Gone,
            Some(row) if !row.active => RowState::Paused,
            Some(_) => RowState::Present,
        })
    }

    /// Lists the bus and removes every row at exactly our hook URL (no normalisation) but `keep`.
    async fn sweep(
        &self,
        keep: Option<i64>,
        warned: &Warnings,
    ) -> Result<Vec<WebhookRow>, BusError> {
        let rows = self.client.list_webhooks().await?;
        self.warn_about_lookalikes(&rows, warned);
        self.remove_stale(&rows, keep).await?;
        Ok(rows)
    }

    /// Removes every row of `rows` at exactly our hook URL but `keep`.
    async fn remove_stale(&self, rows: &[WebhookRow], keep: Option<i64>) -> Result<(), BusError> {
        let stale = rows
            .iter()
            .filter(|row| row.url.as_deref() == Some(&self.config.hook_url))
            .filter_map(|row| row.webhook_id)
            .filter(|id| Some(*id) != keep);
        for id in stale {
            self.config.listing.forget().await;
            self.client.unregister_webhook(id).await?;
            info!(webhook_id = id, "Removed stale {} #{id}", self.config.what);
        }
        Ok(())
    }

    fn warn_about_lookalikes(&self, rows: &[WebhookRow], warned: &Warnings) {
        let Some(hook_url) = &self.hook_url else {
            return;
        };
        for row in rows {
            let (Some(id), Some(url)) = (row.webhook_id, row.url.as_deref()) else {
                continue;
            };
            if !looks_like_ours(hook_url, url) || !warned.first(url) {
                continue;
            }
            warn!(
                webhook_id = id,
                "Webhook #{id} at {url} looks like an older registration of this bridge \
                 (ours is {}); it is left alone in case another bridge listens there. If none \
                 does, remove it: curl -s -H 'Content-Type: application/json' \
                 -H 'Accept: application/json, text/event-stream' -d '{{\"jsonrpc\":\"2.0\",\
                 \"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"unregister_webhook\",\
                 \"arguments\":{{\"webhook_id\":{id}}}}}}}' {}",
                self.config.hook_url,
                self.config.bus_url
            );
        }
    }

    /// Removes our row, best effort, within what is left of [`SHUTDOWN_BUDGET`].
    async fn unregister_on_shutdown(&self) {
        let Some(id) = self.status.take_id() else {
            return;
        };
        let budget = self.shutdown_deadline().remaining();
        match tokio::time::timeout(budget, self.client.unregister_webhook(id)).await {
            Ok(Ok(())) => info!(webhook_id = id, "Unregistered {} #{id}", self.config.what),
            Ok(Err(e)) if e.is_unreachable() => warn!(
                webhook_id = id,
                "Could not unregister webhook #{id} (bus unreachable): {e}; the next start's sweep removes it"
            ),
            Ok(Err(e)) => warn!(
                webhook_id = id,
                "Could not unregister webhook #{id}: {e}; the row may remain until the next start's sweep"
            ),
            Err(_) => warn!(
                webhook_id = id,
                "Could not unregister webhook #{id} within {}s (bus not answering); the next start's sweep removes it",
                SHUTDOWN_BUDGET.as_secs()
            ),
        }
    }

    fn shutdown_deadline(&self) -> Deadline {
        *self
            .shutdown_deadline
            .get_or_init(|| Deadline::after(SHUTDOWN_BUDGET))
    }

    /// Runs `work` unless shutdown comes first (then `None`, and `work` is dropped).
    async fn cancellable<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.shutdown.cancelled() => None,
            output = work => Some(output),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_and_caps_at_thirty() {
        let secs: Vec<u64> = (0..8).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
        assert_eq!(backoff(40), BACKOFF_CAP);
    }

    fn hook() -> Url {
        Url::parse("http://127.0.0.1:8082/hook").expect("valid")
    }

    #[test]
    fn another_port_on_our_host_looks_like_ours() {
        assert!(looks_like_ours(&hook(), "http://127.0.0.1:9000/hook"));
    }

    #[test]
    fn a_loopback_alias_on_our_port_looks_like_ours() {
        assert!(looks_like_ours(&hook(), "http://localhost:8082/hook"));
        assert!(looks_like_ours(&hook(), "http://[::1]:8082/hook"));
        assert!(looks_like_ours(&hook(), "http://127.0.1.1:8082/hook"));
    }

    #[test]
    fn unrelated_urls_do_not_look_like_ours() {
        for other in [
            "http://127.0.0.1:8082/hook",      // ours: swept, not warned about
            "http://127.0.0.1:8082/other",     // another path
            "http://localhost:9000/hook",      // alias and port both differ
            "http://laptop.tailnet:8082/hook", // another machine
            "not a url",
        ] {
            assert!(!looks_like_ours(&hook(), other), "{other}");
        }
    }

    #[test]
    fn a_remote_hook_only_matches_its_own_host() {
        let remote = Url::parse("https://laptop.tailnet.example/hook").expect("valid");
        assert!(looks_like_ours(
            &remote,
            "https://laptop.tailnet.example:8443/hook"
        ));
        assert!(!looks_like_ours(&remote, "https://localhost/hook"));
    }

    #[test]
    fn status_hands_the_id_over_once() {
        let status = RegistrationStatus::default();
        status.record_verified(42);
        let snap = status.snapshot();
        assert!(snap.registered);
        assert_eq!(snap.webhook_id, Some(42));
        assert!(snap.last_verified_at.is_some());
        assert_eq!(status.take_id(), Some(42));
        assert_eq!(status.take_id(), None);
        assert!(!status.snapshot().registered);
    }

    #[test]
    fn config_debug_redacts_the_secret() {
        let config = RegistrationConfig {
            what: "bridge webhook",
            channel: crate::bus::SESSION_CHANNEL.into(),
            bus_url: "http://bus/mcp".into(),
            hook_url: "http://127.0.0.1:1/hook".into(),
            secret: Some(Secret::new("s3cret")),
            keep_interval: Duration::from_secs(60),
            listing: Arc::default(),
        };
        assert!(!format!("{config:?}").contains("s3cret"));
    }
}
