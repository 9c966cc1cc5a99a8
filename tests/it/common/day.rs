//! A compressed day for the real Claude Code: the daemon's settings that make a minute of
//! idleness seconds, the step bounds of a loaded two-core machine, and the texts
//! `config/default.toml` ships, as the model sees them.

use std::time::Duration;

/// The daemon's settings for a compressed day.
pub const CLOCK: &[(&str, &str)] = &[
    ("WAKEBRIDGE_NUDGER__POLL_INTERVAL", "200ms"),
    ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "6s"),
    ("WAKEBRIDGE_NUDGER__BASE_COOLDOWN", "2s"),
    ("WAKEBRIDGE_NUDGER__MAX_COOLDOWN", "4s"),
    ("WAKEBRIDGE_NUDGER__ACKNOWLEDGE_AFTER", "2"),
    ("WAKEBRIDGE_CONTEXT__ENABLED", "true"),
    ("WAKEBRIDGE_CONTEXT__POLL_INTERVAL", "500ms"),
    ("WAKEBRIDGE_LIMITS__RESUME_GRACE", "1s"),
    ("WAKEBRIDGE_LIMITS__AUTO_CONTINUE_WAIT", "2s"),
];
/// `CLOCK`'s base cooldown: the least gap between two nudges of one series.
pub const BASE_COOLDOWN: Duration = Duration::from_secs(2);

/// The longest any one step may take on a loaded two-core machine.
pub const STEP: Duration = Duration::from_secs(60);
/// How long "nothing more is told" is watched.
pub const QUIET: Duration = Duration::from_secs(3);

/// `config/default.toml`'s `[nudger] messages`, in turn.
pub const NUDGE_1: &str = "Please continue with the task at hand.";
pub const NUDGE_2: &str = "If the task is finished, say so and summarise; otherwise continue.";
pub const NUDGE_3: &str = "Still there? Pick up where you left off, or report what blocks you.";
/// From `config/default.toml`'s `[context.thresholds]` messages.
pub const WRAP_UP: &str = "wrap up the current step";
pub const CHECKPOINT: &str = "checkpoint now";

/// Waits until `sid` is acknowledged idle after `CLOCK`'s two unanswered nudges, and returns
/// its `/sessions` view.
pub async fn acknowledged(
    server: &super::harness::TestServer,
    sid: &str,
    context: impl Fn() -> String,
) -> serde_json::Value {
    let acknowledged = server
        .session_until(
            sid,
            "acknowledged idle",
            STEP,
            |s| s["state"] == "acknowledged-idle",
            context,
        )
        .await;
    assert_eq!(acknowledged["nudge"]["unanswered"], 2, "{acknowledged}");
    acknowledged
}

/// Sleeps past the echo grace of the last nudge `acknowledged` shows: a prompt within it reads
/// as that nudge's echo, not as a person coming back.
pub async fn past_echo_grace(acknowledged: &serde_json::Value) {
    let nudged_at: jiff::Timestamp = acknowledged["nudge"]["last_nudge_at"]
        .as_str()
        .and_then(|at| at.parse().ok())
        .unwrap_or_else(|| panic!("no last nudge time: {acknowledged}"));
    let echo_over = nudged_at + wakebridge::session::ECHO_GRACE + Duration::from_secs(1);
    if let Ok(left) = Duration::try_from(echo_over - jiff::Timestamp::now()) {
        tokio::time::sleep(left).await;
    }
}

/// Waits until `done` holds, failing with the session's `/sessions` entry and `context` (what
/// the model was told, the end of what the session drew).
pub async fn until(
    what: &str,
    server: &super::harness::TestServer,
    sid: &str,
    context: &impl Fn() -> String,
    done: impl Fn() -> bool,
) {
    super::eventually_ok(what, STEP, async || {
        if done() {
            return Ok(());
        }
        let status = server.session(sid).await;
        Err(format!("{status}\n{}", context()))
    })
    .await;
}
