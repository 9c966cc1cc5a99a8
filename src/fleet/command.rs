//! Commands between the fleet's machines. `wakebridge pause|unpause|wake|rewind --machine NAME`
//! has the local daemon publish a command sealed with the fleet key on the named machine's
//! `wakebridge:cmd:<machine>:` channel and wait for its answer. That machine takes it from its
//! fleet webhook, or from the channel at its next catch-up when the webhook missed it, checks it
//! in a fixed order (fleet signature, addressed to it, within its lifetime, not seen before, a
//! verb it accepts), runs it through the local route's own rules, and publishes the route's
//! answer on `wakebridge:result:<from>:`. A command names a verb and the local route's body (a
//! session id, a configured message's name): never text to type.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::seal::{self, Broken};
use super::{Fleet, bus_session};
use crate::bus::BusError;
use crate::deadline::Deadline;
use crate::telemetry::{FleetRefusal, fleet_refused};

/// The bus's event type of a command, and of its answer.
pub const COMMAND_EVENT: &str = "wakebridge_command";
pub const RESULT_EVENT: &str = "wakebridge_result";
/// How long a command is good for once sent: well past the sender's wait, so a machine that
/// catches up on it a little late still runs it.
const LIFETIME: Duration = Duration::from_secs(30);
/// The clock difference tolerated between two machines.
const SKEW: Duration = Duration::from_secs(60);
/// The longest lifetime a command may claim: what bounds how long its id must be remembered.
const LONGEST_LIFETIME: Duration = Duration::from_secs(300);
/// Ids of commands seen are remembered this long: far past any lifetime and skew.
const SEEN_KEPT: Duration = Duration::from_secs(24 * 3600);
/// How long the sender waits for the answer, and how often it looks.
pub const ANSWER_WAIT: Duration = Duration::from_secs(10);
const ANSWER_POLL: Duration = Duration::from_millis(100);
/// Bus events already taken (by the webhook or a catch-up) remembered, so the other path
/// skips them quietly; forgotten past this many.
const TAKEN_KEPT: usize = 10_000;

/// What another machine may ask: each is the local route of the same name.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Verb {
    Wake,
    Pause,
    Unpause,
    Rewind,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A command as it goes on the bus, sealed with the fleet key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Command {
    pub id: String,
    pub from: String,
    pub to: String,
    pub verb: Verb,
    /// The local route's body: `/pause`'s `{"session_ids": [...]}`, `/wake`'s `{"session_id"}`.
    pub args: Value,
    pub issued_at: jiff::Timestamp,
    pub expires_at: jiff::Timestamp,
}

/// A machine's answer to a command: the local route's HTTP status and JSON body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub id: String,
    pub from: String,
    pub status: u16,
    pub answer: Value,
}

/// Runs a verb with the local route's body, through that route's rules: its status and body.
pub type Performer =
    Box<dyn Fn(Verb, Value) -> Pin<Box<dyn Future<Output = (u16, Value)> + Send>> + Send + Sync>;

/// Where a command was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Webhook,
    /// A read of what was published since the last read.
    CatchUp,
    /// The read at start, of what was published before: history, mostly long expired.
    History,
}

/// The channel a machine's commands come on. The trailing `:` matters: the bus's webhooks
/// match channels by prefix, and `wakebridge:cmd:b` would take `wakebridge:cmd:beta`'s.
pub fn command_channel(machine: &str) -> String {
    format!("wakebridge:cmd:{machine}:")
}

pub fn result_channel(machine: &str) -> String {
    format!("wakebridge:result:{machine}:")
}

/// Why a command could not be sent or was not answered.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(
        "no machine named {name:?} in the fleet (machines: {known}); `wakebridge status --fleet` lists them"
    )]
    NoSuchMachine { name: String, known: String },
    #[error("machine {name:?} is offline (last seen {last_seen}): nothing was sent")]
    Offline { name: String, last_seen: String },
    #[error("the bus did not take the command: {0}")]
    Bus(#[from] BusError),
    #[error(
        "machine {name:?} did not answer within {}s; it may still run the command \
         (`wakebridge status --fleet` shows what it did)", ANSWER_WAIT.as_secs()
    )]
    Unanswered { name: String },
}

/// The bus events already taken: each by its bus id and the id of the command it carries (none
/// when it carries no command this machine can read). The same event by the other path is both;
/// a replay, or a fresh bus's reused id, is not.
#[derive(Default)]
pub struct Taken(Mutex<HashSet<String>>);

impl Taken {
    /// Whether the event is taken for the first time; one without a bus id always is.
    fn first(&self, bus_id: Option<i64>, command_id: &str) -> bool {
        let Some(bus_id) = bus_id else {
            return true;
        };
        let Ok(mut taken) = self.0.lock() else {
            return true;
        };
        if taken.len() >= TAKEN_KEPT {
            taken.clear();
        }
        taken.insert(format!("{bus_id}:{command_id}"))
    }
}

impl Command {
    fn new(from: &str, to: &str, verb: Verb, args: Value) -> Command {
        let now = jiff::Timestamp::now();
        Command {
            id: random_id(),
            from: from.to_owned(),
            to: to.to_owned(),
            verb,
            args,
            issued_at: now,
            expires_at: now + jiff::SignedDuration::try_from(LIFETIME).unwrap_or_default(),
        }
    }

    /// Whether `now` is within the command's lifetime, give or take the skew, and the
    /// lifetime it claims is one a sender gives.
    fn current(&self, now: jiff::Timestamp) -> bool {
        let skew = jiff::SignedDuration::try_from(SKEW).unwrap_or_default();
        let claimed = self.expires_at.duration_since(self.issued_at);
        let longest = jiff::SignedDuration::try_from(LONGEST_LIFETIME).unwrap_or_default();
        // At the ends of time the window does not exist: expired.
        let (Ok(earliest), Ok(latest)) = (
            self.issued_at.checked_sub(skew),
            self.expires_at.checked_add(skew),
        ) else {
            return false;
        };
        !claimed.is_negative() && claimed <= longest && (earliest..=latest).contains(&now)
    }
}

fn random_id() -> String {
    let mut bytes = [0u8; 16];
    // SAFETY: the buffer is valid for its 16 bytes, within getentropy's 256.
    let rc = unsafe { libc::getentropy(bytes.as_mut_ptr().cast(), bytes.len()) };
    if rc != 0 {
        // Unique is what matters here, not secret: the time and the process will do.
        let now = jiff::Timestamp::now().as_nanosecond();
        bytes = (now ^ i128::from(std::process::id())).to_le_bytes();
    }
    hex::encode(bytes)
}

impl Fleet {
    /// Checks a command the bus handed over (a webhook body or a `get_events` row), runs it
    /// when every check passes, and answers the sender. A bus event taken before by the other
    /// path is skipped quietly. Every refusal is counted and logged with why, once per bus
    /// event, but for those in the history a start reads: long expired, and counted (if at
    /// all) by the daemon that was running then.
    pub async fn receive(&self, event: &Value, via: Via) {
        let bus_id = event["event_id"].as_i64().or(event["id"].as_i64());
        let Err((why, detail)) = self.take(event, bus_id).await else {
            return;
        };
        let label: &str = why.into();
        if via == Via::History {
            tracing::debug!(why = label, event = ?bus_id, "fleet: a command from before this start was not run: {detail}");
            return;
        }
        fleet_refused(why);
        // Counted every time; logged at most once a window per why (anyone may flood the bus).
        crate::warn_limited!(self.refusals_logged, label, why = label, event = ?bus_id, ?via, "fleet: a command was not run: {detail}");
    }

    /// The checks in order, then the verb; `Ok` also for an event the other path took.
    async fn take(&self, event: &Value, bus_id: Option<i64>) -> Result<(), (FleetRefusal, String)> {
        let me = &self.config.machine;
        let payload = event["payload"].as_str().unwrap_or_default();
        let opened = seal::open::<Command>(COMMAND_EVENT, payload, &self.config.key);
        let command_id = opened.as_ref().map_or("", |c| c.id.as_str());
        if !self.taken.first(bus_id, command_id) {
            return Ok(());
        }
        let command = opened.map_err(|broken| match broken {
            Broken::Signature => (
                FleetRefusal::Signature,
                "not signed with the fleet key".to_owned(),
            ),
            Broken::Malformed(why) => (FleetRefusal::Malformed, why),
        })?;
        let channel = event["channel"].as_str().unwrap_or_default();
        if command.to != *me || channel != command_channel(me) {
            return Err((
                FleetRefusal::NotAddressed,
                format!("addressed to {:?} on channel {channel:?}", command.to),
            ));
        }
        let now = jiff::Timestamp::now();
        if !command.current(now) {
            return Err((
                FleetRefusal::Expired,
                format!(
                    "issued {} to expire {}, and it is {now} here",
                    command.issued_at, command.expires_at
                ),
            ));
        }
        let now_ms = now.as_millisecond();
        let forget_before = now_ms.saturating_sub(crate::clock::duration_ms(SEEN_KEPT));
        let store = &self.store;
        match store
            .first_sight_of_command(&command.id, now_ms, forget_before)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Err((
                    FleetRefusal::Replayed,
                    format!("command {} ran before", command.id),
                ));
            }
            Err(e) => return Err((FleetRefusal::Ledger, e.to_string())),
        }
        let verb = command.verb.as_str();
        let (status, answer) = if !self.config.accept.contains(&command.verb) {
            let error = format!(
                "machine {me} does not take {verb} from the fleet: add \"{verb}\" to [fleet] \
                 accept on {me} to allow it"
            );
            (403, json!({ "error": error }))
        } else {
            match self.performer.get() {
                Some(perform) => perform(command.verb, command.args.clone()).await,
                None => (503, json!({"error": "the daemon is starting"})),
            }
        };
        tracing::info!(from = %command.from, verb, status, "fleet: a command from {} answered {status}", command.from);
        self.reply(&command, status, answer.clone()).await;
        match status {
            200 => Ok(()),
            403 => Err((FleetRefusal::NotAccepted, answer["error"].to_string())),
            _ => Err((FleetRefusal::Rule, answer["error"].to_string())),
        }
    }

    async fn reply(&self, command: &Command, status: u16, answer: Value) {
        let me = &self.config.machine;
        let reply = Reply {
            id: command.id.clone(),
            from: me.clone(),
            status,
            answer,
        };
        let args = json!({
            "event_type": RESULT_EVENT,
            "payload": seal::seal(RESULT_EVENT, &reply, &self.config.key),
            "session_id": bus_session(me),
            "channel": result_channel(&command.from),
            "correlation_id": command.id,
            "signal_level": "info",
        });
        if let Err(e) = self.bus.call_tool("publish_event", args).await {
            tracing::warn!(error = %e, from = %command.from, "fleet: could not publish the answer to a command; it ran all the same");
        }
    }

    /// Sends `verb` with the local route's body `args` to machine `to` and waits for its
    /// answer. A machine offline or unknown gets nothing.
    pub async fn send(&self, to: &str, verb: Verb, args: Value) -> Result<Reply, SendError> {
        let machines = self.others().await?;
        let Some(machine) = machines.iter().find(|m| m.name == to) else {
            let known: Vec<&str> = machines.iter().map(|m| m.name.as_str()).collect();
            return Err(SendError::NoSuchMachine {
                name: to.to_owned(),
                known: std::iter::once(self.config.machine.as_str())
                    .chain(known)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        if !machine.online {
            let last_seen = machine
                .last_seen
                .map_or("never".to_owned(), |at| at.to_string());
            return Err(SendError::Offline {
                name: to.to_owned(),
                last_seen,
            });
        }
        let me = &self.config.machine;
        let command = Command::new(me, to, verb, args);
        let publish = json!({
            "event_type": COMMAND_EVENT,
            "payload": seal::seal(COMMAND_EVENT, &command, &self.config.key),
            "session_id": bus_session(me),
            "channel": command_channel(to),
            "correlation_id": command.id,
            "signal_level": "info",
        });
        let published = self.bus.call_tool("publish_event", publish).await?;
        // Answers come after the command: read from it, oldest first, so junk published under
        // its (public) correlation id cannot push the answer out of a page.
        let mut cursor = published["event_id"].as_i64().map(|id| id.to_string());
        let deadline = Deadline::after(ANSWER_WAIT);
        while !deadline.expired() {
            tokio::time::sleep(ANSWER_POLL).await;
            let look = json!({"channel": result_channel(me), "correlation_id": command.id,
                              "event_types": [RESULT_EVENT], "limit": 100, "order": "asc",
                              "cursor": cursor});
            let Ok(found) = self.bus.call_tool("get_events", look).await else {
                continue;
            };
            if let Some(next) = found["next_cursor"].as_str() {
                cursor = Some(next.to_owned());
            }
            let events = found["events"].as_array().map_or(&[][..], Vec::as_slice);
            let reply = (events.iter())
                .filter_map(|e| e["payload"].as_str())
                .filter_map(|p| seal::open::<Reply>(RESULT_EVENT, p, &self.config.key).ok())
                .find(|reply| reply.id == command.id && reply.from == to);
            if let Some(reply) = reply {
                return Ok(reply);
            }
        }
        Err(SendError::Unanswered {
            name: to.to_owned(),
        })
    }

    /// Reads this machine's command channel since `cursor` (the newest few, as history, when
    /// `None`) and takes the commands the webhook missed; the cursor to read from next time.
    /// At most `CATCH_UP_PAGES` pages a call: a flood waits for the next. With `session_id`,
    /// the read is this daemon's heartbeat too.
    pub(super) async fn catch_up(&self, cursor: Option<String>) -> Result<String, BusError> {
        let mine = command_channel(&self.config.machine);
        let via = if cursor.is_some() {
            Via::CatchUp
        } else {
            Via::History
        };
        let mut cursor = cursor;
        for _ in 0..CATCH_UP_PAGES {
            let order = if cursor.is_some() { "asc" } else { "desc" };
            let args = json!({"channel": mine, "cursor": cursor, "order": order,
                              "limit": CATCH_UP_PAGE, "event_types": [COMMAND_EVENT],
                              "session_id": bus_session(&self.config.machine)});
            let page = self.bus.call_tool("get_events", args).await?;
            let Some(events) = page["events"].as_array() else {
                return Err(BusError::unusable(
                    "get_events",
                    format!("no events in {page}"),
                ));
            };
            // Oldest first, as they were sent.
            let mut commands: Vec<&Value> = events.iter().collect();
            commands.sort_by_key(|e| e["id"].as_i64());
            for event in commands {
                self.receive(event, via).await;
            }
            // An empty channel is read from its start next time: all of it is new then.
            let next = (page["next_cursor"].as_str().map(str::to_owned))
                .or_else(|| cursor.clone())
                .unwrap_or_else(|| "0".to_owned());
            let more = page["has_more"].as_bool() == Some(true) && order == "asc";
            if !more || cursor.as_deref() == Some(next.as_str()) {
                return Ok(next);
            }
            cursor = Some(next);
        }
        Ok(cursor.unwrap_or_else(|| "0".to_owned()))
    }
}

/// Commands read per catch-up call, and calls at most per catch-up: the read at start takes the
/// newest page.
const CATCH_UP_PAGE: u32 = 100;
const CATCH_UP_PAGES: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;

    fn command(issued: &str, expires: &str) -> Command {
        Command {
            issued_at: issued.parse().unwrap(),
            expires_at: expires.parse().unwrap(),
            ..Command::new("a", "b", Verb::Pause, json!({}))
        }
    }

    #[test]
    fn a_command_is_current_within_its_lifetime_and_a_minute_of_skew() {
        let c = command("2026-12-07T10:00:00Z", "2026-12-07T10:00:30Z");
        let at = |t: &str| c.current(t.parse().unwrap());
        assert!(at("2026-12-07T10:00:10Z"));
        assert!(
            at("2026-12-07T09:59:01Z"),
            "a sender's clock a little ahead"
        );
        assert!(at("2026-12-07T10:01:29Z"), "ours a little ahead");
        assert!(!at("2026-12-07T09:58:59Z"));
        assert!(!at("2026-12-07T10:01:31Z"));
        let long = command("2026-12-07T10:00:00Z", "2026-12-08T10:00:00Z");
        assert!(!long.current("2026-12-07T10:00:10Z".parse().unwrap()));
        let backwards = command("2026-12-07T10:00:30Z", "2026-12-07T10:00:00Z");
        assert!(!backwards.current("2026-12-07T10:00:10Z".parse().unwrap()));
    }

    #[test]
    fn a_command_at_the_ends_of_time_is_expired_not_a_panic() {
        let now = "2026-12-07T10:00:00Z".parse().unwrap();
        let thirty = jiff::SignedDuration::from_secs(30);
        let at = |issued: jiff::Timestamp, expires: jiff::Timestamp| Command {
            issued_at: issued,
            expires_at: expires,
            ..Command::new("a", "b", Verb::Pause, json!({}))
        };
        let (first, last) = (jiff::Timestamp::MIN, jiff::Timestamp::MAX);
        assert!(!at(first, first + thirty).current(now));
        assert!(!at(last - thirty, last).current(now));
    }

    #[test]
    fn a_command_carries_no_field_beyond_its_own() {
        let mut c = serde_json::to_value(Command::new("a", "b", Verb::Wake, json!({}))).unwrap();
        c["text"] = json!("rm -rf ~\n");
        assert!(serde_json::from_value::<Command>(c).is_err());
    }

    #[test]
    fn ids_differ() {
        assert_ne!(random_id(), random_id());
        assert_eq!(random_id().len(), 32);
    }

    #[test]
    fn verbs_are_lowercase_words() {
        assert_eq!(Verb::Unpause.as_str(), "unpause");
        assert_eq!("rewind".parse::<Verb>().unwrap(), Verb::Rewind);
        assert_eq!(serde_json::to_value(Verb::Wake).unwrap(), json!("wake"));
    }
}
