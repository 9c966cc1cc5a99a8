//! A real Claude Code on a bare pseudo-terminal, the way a person runs it straight in a terminal
//! or over ssh: no tmux, no zellij, no `TMUX*` or `ZELLIJ*` variable, so no pane wakebridge
//! could read or type into, and never a bus message. Its hooks and status line wired by
//! `wakebridge claude install`, the daemon in process on a compressed clock, the scripted model
//! in place of Anthropic's API. Everything wakebridge does for it goes through its inbox, and
//! every step is asserted on what the model was told, and how many times: nudged with backoff
//! until acknowledged idle; warned once at 75 % and once at 85 % of its context; held at the
//! 5-hour limit with nothing told, and resumed once after the reset.

use std::time::{Duration, UNIX_EPOCH};

use crate::common;
use crate::common::claude::BareClaude;
use crate::common::day::{
    self, BASE_COOLDOWN, CHECKPOINT, CLOCK, NUDGE_1, NUDGE_2, NUDGE_3, QUIET, STEP, WRAP_UP, until,
};
use crate::common::model::{Model, Reply, unix_in};
use crate::common::rig::start_daemon_with;
use crate::common::tmux::TmuxServer;

/// `config/default.toml`'s `[limits] resume_message`.
const RESUME: &str = "continue";
/// How Claude Code hands the model a message from its inbox (idle: a new turn).
const FROM_INBOX: &str = "Another Claude session sent a message:";

/// What a person types.
const FIRST: &str = "Start on the parser.";
const PARSER: &str = "Build the parser.";
const PRINTER: &str = "Now the printer.";
const ONE_MORE: &str = "One more thing.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_claude_code_on_a_bare_pty_is_kept_through_its_inbox() {
    let Some(claude) = common::real_claude() else {
        common::skip_or_fail("no `claude` on PATH", common::GET_CLAUDE);
        return;
    };
    let model = Model::start().await;
    // The person's turns fill the window; the answers to the warnings keep it where it is, so
    // no level re-arms and is told again.
    model.on(PARSER, Reply::at_context("Parser built.", 76.0));
    model.on(WRAP_UP, Reply::at_context("Wrapping up.", 77.0));
    model.on(PRINTER, Reply::at_context("Printer built.", 86.0));
    model.on(CHECKPOINT, Reply::at_context("Checkpoint written.", 87.0));

    // The mux backend's config names a tmux server: a private one with nothing but its keeper.
    // The session is not in it, nor in any other.
    let tmux = TmuxServer::start();
    let server = start_daemon_with(&tmux, None, CLOCK).await;
    let session = BareClaude::installed(&claude, &server, &model.claude_env()).await;
    let sid = session.sid.clone();
    let context = || format!("{}\n{}", model.transcript(), session.screen());
    let known = server.session(&sid).await;
    assert!(known["pane"].is_null(), "no pane: {known}");
    assert_eq!(known["cwd"], session.work.display().to_string(), "{known}");
    assert_eq!(
        tmux.tmux(&["list-panes", "-a", "-F", "#{pane_id}"])
            .lines()
            .count(),
        1,
        "the daemon's tmux server holds its keeper alone"
    );
    assert_eq!(
        session.registry(&server)["sessionId"],
        sid.as_str(),
        "the daemon's session is the pty's process: {known}"
    );

    // a. A person's first prompt gives the session a turn; then it idles and is nudged through
    // its inbox, backing off, until acknowledged, then left alone.
    session.submit(FIRST).await;
    until("the first prompt told", &server, &sid, &context, || {
        model.told(FIRST) == 1
    })
    .await;
    until("the first nudge told", &server, &sid, &context, || {
        model.told(NUDGE_1) == 1
    })
    .await;
    until("the second nudge told", &server, &sid, &context, || {
        model.told(NUDGE_2) == 1
    })
    .await;
    let acknowledged = day::acknowledged(&server, &sid, context).await;
    let (first, second) = (model.told_at(NUDGE_1)[0], model.told_at(NUDGE_2)[0]);
    let gap = second.duration_since(first).unwrap_or_default();
    assert!(
        gap >= BASE_COOLDOWN,
        "backed off only {gap:?}:\n{}",
        context()
    );
    let heard = model.requests().len();
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        model.requests().len(),
        heard,
        "told after the acknowledgement:\n{}",
        context()
    );
    assert_eq!(
        (
            model.told(NUDGE_1),
            model.told(NUDGE_2),
            model.told(NUDGE_3)
        ),
        (1, 1, 0),
        "{}",
        context()
    );
    for nudge in [NUDGE_1, NUDGE_2] {
        assert_eq!(model.mentioned_with(nudge, FROM_INBOX), 1, "{}", context());
    }

    // b. A person's prompt brings it back (after the last nudge's echo grace: a prompt within it
    // reads as that nudge's echo, not as life); the window fills and each warning is told once,
    // through the inbox.
    day::past_echo_grace(&acknowledged).await;
    session.submit(PARSER).await;
    until("the wrap-up told", &server, &sid, &context, || {
        model.mentioned(WRAP_UP) == 1
    })
    .await;
    let alive = server.session(&sid).await;
    assert_ne!(alive["state"], "acknowledged-idle", "{alive}");
    session.submit(PRINTER).await;
    until("the checkpoint told", &server, &sid, &context, || {
        model.mentioned(CHECKPOINT) == 1
    })
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        (model.mentioned(WRAP_UP), model.mentioned(CHECKPOINT)),
        (1, 1),
        "{}",
        context()
    );
    for warning in [WRAP_UP, CHECKPOINT] {
        assert_eq!(
            model.mentioned_with(warning, FROM_INBOX),
            1,
            "{}",
            context()
        );
    }

    // c. The 5-hour limit: held with nothing told, then resumed once through the inbox after
    // the reset.
    let resets_at = unix_in(Duration::from_secs(20));
    model.limit_until(resets_at);
    session.submit(ONE_MORE).await;
    let limited = server
        .session_until(
            &sid,
            "held at the limit",
            STEP,
            |s| s["state"] == "limited",
            context,
        )
        .await;
    assert!(limited["limit"].is_object(), "{limited}");
    until("the resume told", &server, &sid, &context, || {
        model.told(RESUME) >= 1
    })
    .await;
    tokio::time::sleep(QUIET).await;
    let resumed = model.told_at(RESUME);
    assert_eq!(resumed.len(), 1, "{}", context());
    let reset = UNIX_EPOCH + Duration::from_secs(resets_at);
    assert!(
        resumed[0] >= reset,
        "resumed before the reset:\n{}",
        context()
    );
    assert_eq!(
        model.answered(429),
        1,
        "one prompt met the limit:\n{}",
        context()
    );
    let requests = model.requests();
    let refused = requests.iter().find(|r| r.status == 429).map(|r| r.at);
    let held: Vec<_> = requests
        .iter()
        .filter(|r| refused.is_some_and(|at| r.at > at) && r.at < resumed[0])
        .collect();
    assert!(held.is_empty(), "told while held: {held:?}\n{}", context());
    let resume = requests.iter().find(|r| r.at == resumed[0]);
    assert!(
        resume.is_some_and(|r| r.new_text.contains(FROM_INBOX)),
        "the resume came through the inbox: {resume:?}"
    );
}
