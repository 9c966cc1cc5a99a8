//! Context monitor behaviour over real files: transcripts written by the tests themselves (no
//! real user data), followed through `TranscriptFollower` as the daemon does.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wakebridge::agent::Agent;
use wakebridge::claude::home::find_transcript_in;
use wakebridge::context::follow::{
    ChangeWatcher, INITIAL_TAIL_BYTES, MAX_TAIL_BYTES, PollEvent, TranscriptFollower,
};
use wakebridge::context::window::{WindowResolver, WindowSource};
use wakebridge::context::{UsageSource, figures};
use wakebridge::reading::transcript::ContextReading;

use crate::common;
use crate::common::{TestResult, append};

const SID: &str = "3f0c9a52-8d1e-4c7b-9a44-2b6f1e0d7c11";

fn user(text: &str) -> String {
    format!(
        r#"{{"parentUuid":null,"isSidechain":false,"type":"user","sessionId":"{SID}","message":{{"role":"user","content":"{text}"}},"uuid":"u","timestamp":"2026-11-30T09:00:00.000Z"}}"#
    )
}

fn assistant_with(model: &str, input: u64, creation: u64, read: u64, extra: &str) -> String {
    format!(
        r#"{{"parentUuid":"p","isSidechain":false,"type":"assistant","sessionId":"{SID}","requestId":"req_1","message":{{"id":"msg_1","type":"message","role":"assistant","model":"{model}","content":[{{"type":"text","text":"ok"}}],"stop_reason":null,"usage":{{"input_tokens":{input},"cache_creation_input_tokens":{creation},"cache_read_input_tokens":{read},"output_tokens":87,"service_tier":"standard"}}}}{extra},"uuid":"a","timestamp":"2026-11-30T09:00:02.100Z"}}"#
    )
}

fn assistant(model: &str, input: u64, creation: u64, read: u64) -> String {
    assistant_with(model, input, creation, read, "")
}

fn sidechain(model: &str, input: u64) -> String {
    format!(
        r#"{{"parentUuid":"p","isSidechain":true,"agentId":"a1b2","type":"assistant","message":{{"id":"msg_s","role":"assistant","model":"{model}","content":[],"stop_reason":"end_turn","usage":{{"input_tokens":{input},"cache_creation_input_tokens":0,"cache_read_input_tokens":9100,"output_tokens":40}}}},"uuid":"s"}}"#
    )
}

fn api_error() -> String {
    r#"{"parentUuid":"p","isSidechain":false,"type":"assistant","isApiErrorMessage":true,"apiError":"connection_failed","error":"server_error","message":{"id":"9cd9","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"API Error"}],"stop_reason":"stop_sequence","usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}},"uuid":"e"}"#.to_owned()
}

fn compact_boundary(post: u64) -> String {
    format!(
        r#"{{"parentUuid":"p","isSidechain":false,"type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{{"trigger":"auto","preTokens":167012,"postTokens":{post}}},"uuid":"c"}}"#
    )
}

fn write_lines(path: &Path, lines: &[String], ending: &str) -> std::io::Result<()> {
    let mut body = String::new();
    for line in lines {
        body.push_str(line);
        body.push_str(ending);
    }
    std::fs::write(path, body)
}

/// Follows `lines` written to a fresh file and returns the reading after one poll.
fn reading_of(
    lines: &[String],
    ending: &str,
) -> Result<Option<ContextReading>, Box<dyn std::error::Error>> {
    let dir = common::tempdir();
    let path = dir.path().join(format!("{SID}.jsonl"));
    write_lines(&path, lines, ending)?;
    let mut follower = TranscriptFollower::new(&path, Agent::Claude);
    let outcome = follower.poll()?;
    assert_eq!(outcome.event, PollEvent::Opened);
    Ok(follower.current().cloned())
}

fn used(reading: &Option<ContextReading>) -> Option<u64> {
    reading.as_ref().map(|r| r.used_tokens)
}

#[test]
fn plain_usage_is_input_plus_cache_tokens_of_newest_assistant() -> TestResult {
    let r = reading_of(
        &[
            user("hi"),
            assistant("claude-sonnet-4-5-20250929", 10, 100, 1000),
            user("more"),
            assistant("claude-sonnet-4-5-20250929", 4, 2150, 18420),
        ],
        "\n",
    )?;
    assert_eq!(used(&r), Some(20_574));
    assert_eq!(r.as_ref().map(|r| r.source), Some(UsageSource::Assistant));
    let f = figures(r.as_ref(), None, &WindowResolver::default());
    assert_eq!(f.percent, Some(10.3));
    assert_eq!(f.window_source, WindowSource::ModelTable);
    Ok(())
}

#[test]
fn streaming_duplicates_give_the_same_figure() -> TestResult {
    let line = assistant("claude-sonnet-4-5", 4, 2150, 18420);
    let r = reading_of(&[user("x"), line.clone(), line.clone(), line], "\n")?;
    assert_eq!(used(&r), Some(20_574));
    Ok(())
}

#[test]
fn sidechain_records_newer_than_main_chain_are_ignored() -> TestResult {
    let r = reading_of(
        &[
            assistant("claude-opus-4-1", 5, 0, 50_000),
            sidechain("claude-haiku-4-5", 12),
            sidechain("claude-haiku-4-5", 999_999),
        ],
        "\n",
    )?;
    assert_eq!(used(&r), Some(50_005));
    assert_eq!(r.and_then(|r| r.model).as_deref(), Some("claude-opus-4-1"));
    Ok(())
}

#[test]
fn synthetic_api_error_as_last_line_is_skipped() -> TestResult {
    let r = reading_of(
        &[assistant("claude-opus-4-1", 1, 2, 30_000), api_error()],
        "\n",
    )?;
    assert_eq!(used(&r), Some(30_003));
    Ok(())
}

#[test]
fn compaction_boundary_resets_to_post_tokens() -> TestResult {
    // The reference walk-through: real usage, a sidechain, a boundary, a summary, an API error.
    let r = reading_of(
        &[
            user("Add a /healthz endpoint"),
            assistant("claude-sonnet-4-5-20250929", 4, 2150, 18420),
            sidechain("claude-haiku-4-5", 12),
            compact_boundary(14_310),
            r#"{"isSidechain":false,"type":"user","isCompactSummary":true,"message":{"role":"user","content":"continued"}}"#.to_owned(),
            api_error(),
        ],
        "\n",
    )?;
    assert_eq!(used(&r), Some(14_310));
    assert_eq!(
        r.as_ref().map(|r| r.source),
        Some(UsageSource::CompactBoundary)
    );
    let f = figures(r.as_ref(), None, &WindowResolver::default());
    assert_eq!(
        (f.percent, f.usage_source),
        (Some(7.2), Some(UsageSource::CompactBoundary))
    );
    // A later response counts again.
    let r = reading_of(
        &[
            compact_boundary(14_310),
            assistant("claude-sonnet-4-5", 1, 1, 20_000),
        ],
        "\n",
    )?;
    assert_eq!(used(&r), Some(20_002));
    Ok(())
}

#[test]
fn one_million_model_suffix_sets_the_window() -> TestResult {
    let r = reading_of(&[assistant("claude-sonnet-4-5[1m]", 0, 0, 250_000)], "\n")?;
    let f = figures(r.as_ref(), None, &WindowResolver::default());
    assert_eq!(
        (f.context_window, f.window_source),
        (1_000_000, WindowSource::ModelSuffix)
    );
    assert_eq!(f.percent, Some(25.0));
    Ok(())
}

#[test]
fn unknown_model_falls_back_to_default_window() -> TestResult {
    let r = reading_of(&[assistant("some-new-model-9", 0, 0, 150_000)], "\n")?;
    let f = figures(r.as_ref(), None, &WindowResolver::default());
    assert_eq!(
        (f.context_window, f.window_source),
        (200_000, WindowSource::Default)
    );
    assert_eq!(f.percent, Some(75.0));
    Ok(())
}

#[test]
fn unknown_record_types_and_garbage_are_skipped() -> TestResult {
    let r = reading_of(
        &[
            assistant("claude-opus-4-1", 1, 1, 1),
            r#"{"type":"atis-latch","value":{"assistant":true}}"#.to_owned(),
            r#"{"type":"api-request","attempt":3}"#.to_owned(),
            r#"{"type":"file-history-snapshot","snapshot":{}}"#.to_owned(),
            "not json at all".to_owned(),
            "{\"type\":\"assistant\",".to_owned(),
            String::new(),
        ],
        "\n",
    )?;
    assert_eq!(used(&r), Some(3));
    Ok(())
}

#[test]
fn torn_last_line_is_not_read_until_completed() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("t.jsonl");
    let last = assistant("claude-opus-4-1", 0, 0, 90_000);
    let (head, tail) = last.split_at(last.len() / 2);
    std::fs::write(
        &path,
        format!("{}\n{head}", assistant("claude-opus-4-1", 0, 0, 10)),
    )?;
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    f.poll()?;
    assert_eq!(f.current().map(|r| r.used_tokens), Some(10));
    append(&path, tail)?;
    f.poll()?;
    assert_eq!(
        f.current().map(|r| r.used_tokens),
        Some(10),
        "no newline yet"
    );
    append(&path, "\n")?;
    f.poll()?;
    assert_eq!(f.current().map(|r| r.used_tokens), Some(90_000));
    Ok(())
}

#[test]
fn empty_file_has_no_reading() -> TestResult {
    let r = reading_of(&[], "\n")?;
    assert_eq!(r, None);
    let f = figures(None, None, &WindowResolver::default());
    assert_eq!(f.percent, None);
    Ok(())
}

#[test]
fn crlf_line_endings_are_tolerated() -> TestResult {
    let r = reading_of(
        &[
            user("x"),
            assistant("claude-opus-4-1", 1, 2, 3),
            compact_boundary(77),
        ],
        "\r\n",
    )?;
    assert_eq!(used(&r), Some(77));
    Ok(())
}

#[test]
fn follower_reads_only_appended_bytes() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("grow.jsonl");
    write_lines(&path, &[assistant("claude-opus-4-1", 0, 0, 100)], "\n")?;
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    f.poll()?;
    let before = f.current().cloned();
    let unchanged = f.poll()?;
    assert_eq!(
        (unchanged.event, unchanged.bytes_read),
        (PollEvent::Unchanged, 0)
    );
    assert_eq!(f.current(), before.as_ref());
    let more = format!(
        "{}\n{}\n",
        user("again"),
        assistant("claude-opus-4-1", 0, 0, 200)
    );
    append(&path, &more)?;
    let grew = f.poll()?;
    assert_eq!(grew.event, PollEvent::Appended);
    assert_eq!(grew.bytes_read, more.len() as u64);
    assert_eq!(f.current().map(|r| r.used_tokens), Some(200));
    assert_eq!(f.poll()?.event, PollEvent::Unchanged, "read up to the end");
    Ok(())
}

#[test]
fn follower_retails_after_truncation() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("trunc.jsonl");
    write_lines(
        &path,
        &[
            assistant("claude-opus-4-1", 0, 0, 100),
            assistant("claude-opus-4-1", 0, 0, 500),
        ],
        "\n",
    )?;
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    f.poll()?;
    assert_eq!(f.current().map(|r| r.used_tokens), Some(500));
    write_lines(&path, &[assistant("claude-opus-4-1", 0, 0, 7)], "\n")?;
    let o = f.poll()?;
    assert_eq!(o.event, PollEvent::Truncated);
    assert_eq!(f.current().map(|r| r.used_tokens), Some(7));
    Ok(())
}

#[test]
fn follower_notices_in_place_rewrite_that_grew_past_offset() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("rewrite.jsonl");
    write_lines(&path, &[assistant("claude-opus-4-1", 0, 0, 100)], "\n")?;
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    f.poll()?;
    // Same inode, rewritten with longer content whose byte before the old offset is not '\n'.
    let mut file = OpenOptions::new().write(true).truncate(true).open(&path)?;
    writeln!(
        file,
        "{}",
        assistant_with(
            "claude-opus-4-1",
            0,
            0,
            4242,
            r#","pad":"xxxxxxxxxxxxxxxxxxxx""#
        )
    )?;
    drop(file);
    let o = f.poll()?;
    assert_eq!(o.event, PollEvent::Truncated);
    assert_eq!(f.current().map(|r| r.used_tokens), Some(4242));
    Ok(())
}

#[test]
fn follower_reopens_replaced_file() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("swap.jsonl");
    write_lines(&path, &[assistant("claude-opus-4-1", 0, 0, 100)], "\n")?;
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    f.poll()?;
    let other = dir.path().join("new.jsonl");
    write_lines(
        &other,
        &[
            user("a"),
            user("b"),
            user("c"),
            assistant("claude-opus-4-1", 0, 0, 300),
        ],
        "\n",
    )?;
    std::fs::rename(&other, &path)?;
    let o = f.poll()?;
    assert_eq!(o.event, PollEvent::Replaced);
    assert_eq!(f.current().map(|r| r.used_tokens), Some(300));
    Ok(())
}

#[test]
fn follower_waits_for_late_creation() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("late.jsonl");
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    assert_eq!(f.poll()?.event, PollEvent::Missing);
    assert_eq!(f.current(), None);
    write_lines(&path, &[assistant("claude-opus-4-1", 0, 0, 42)], "\n")?;
    let o = f.poll()?;
    assert_eq!(o.event, PollEvent::Opened);
    assert_eq!(f.current().map(|r| r.used_tokens), Some(42));
    Ok(())
}

#[test]
fn tail_window_grows_until_a_record_decides() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("big.jsonl");
    let mut lines = vec![assistant("claude-opus-4-1", 0, 0, 1234)];
    // ~500 KB of user turns after the last assistant record: past the first window.
    lines.extend((0..2000).map(|i| user(&format!("{i:0>80}"))));
    write_lines(&path, &lines, "\n")?;
    let size = std::fs::metadata(&path)?.len();
    assert!(size > 3 * INITIAL_TAIL_BYTES / 2, "{size}");
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    let o = f.poll()?;
    assert_eq!(f.current().map(|r| r.used_tokens), Some(1234));
    // Doubling reads at most about twice the file.
    assert!(
        o.bytes_read <= 2 * size + 8192,
        "read {} of {size}",
        o.bytes_read
    );
    Ok(())
}

#[test]
fn tail_reads_only_the_end_of_a_long_history() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("long.jsonl");
    let mut body = String::new();
    while body.len() < 4 << 20 {
        body.push_str(&assistant("claude-opus-4-1", 0, 0, 1));
        body.push('\n');
    }
    body.push_str(&assistant("claude-opus-4-1", 0, 0, 99));
    body.push('\n');
    std::fs::write(&path, &body)?;
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    let o = f.poll()?;
    assert_eq!(f.current().map(|r| r.used_tokens), Some(99));
    assert!(o.bytes_read <= INITIAL_TAIL_BYTES);
    Ok(())
}

#[test]
fn tail_gives_up_at_the_cap_then_follows_appends() -> TestResult {
    let dir = common::tempdir();
    let path = dir.path().join("capped.jsonl");
    // One user turn longer than the largest tail window after the last assistant record.
    let past_the_cap = "x".repeat(MAX_TAIL_BYTES as usize + 1);
    let lines = [assistant("claude-opus-4-1", 0, 0, 5), user(&past_the_cap)];
    write_lines(&path, &lines, "\n")?;
    let mut f = TranscriptFollower::new(&path, Agent::Claude);
    let o = f.poll()?;
    assert_eq!(
        f.current(),
        None,
        "record beyond the cap is not searched for"
    );
    assert!(o.bytes_read <= 2 * MAX_TAIL_BYTES, "read {}", o.bytes_read);
    append(
        &path,
        &format!("{}\n", assistant("claude-opus-4-1", 0, 0, 6)),
    )?;
    f.poll()?;
    assert_eq!(f.current().map(|r| r.used_tokens), Some(6));
    Ok(())
}

fn make_transcript(config: &Path, project: &str, sid: &str) -> std::io::Result<PathBuf> {
    let dir = config.join("projects").join(project);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{sid}.jsonl"));
    std::fs::write(&path, "")?;
    Ok(path)
}

#[test]
fn finds_transcript_by_hint_then_under_config_dirs() -> TestResult {
    let home = common::tempdir();
    let a = home.path().join("a");
    let b = home.path().join("b");
    let found = make_transcript(&b, "-home-dev-proj", SID)?;
    // A subagent file with the same name must never be picked.
    let sub = a
        .join("projects")
        .join("-home-dev-proj")
        .join(SID)
        .join("subagents");
    std::fs::create_dir_all(&sub)?;
    std::fs::write(sub.join(format!("{SID}.jsonl")), "")?;
    let dirs = vec![a.clone(), b.clone()];
    assert_eq!(find_transcript_in(&dirs, SID, None), Some(found.clone()));
    let hint = make_transcript(home.path(), "elsewhere", "other")?;
    assert_eq!(find_transcript_in(&dirs, SID, Some(&hint)), Some(hint));
    assert_eq!(
        find_transcript_in(&dirs, SID, Some(&sub.join(format!("{SID}.jsonl")))),
        Some(found)
    );
    assert_eq!(find_transcript_in(&dirs, "../etc", None), None);
    assert_eq!(find_transcript_in(&dirs, "missing", None), None);
    Ok(())
}

#[tokio::test]
async fn change_watcher_reports_writes_and_falls_back_to_ticks() -> TestResult {
    let dir = common::tempdir();
    let mut watcher = ChangeWatcher::new(Duration::from_millis(300));
    watcher.watch_dir(dir.path())?;
    let path = dir.path().join("w.jsonl");
    std::fs::write(&path, "x\n")?;
    let changed = tokio::time::timeout(Duration::from_secs(5), watcher.next()).await?;
    assert!(
        changed.iter().any(|p| p.ends_with("w.jsonl")),
        "{changed:?}"
    );
    // Drain anything queued, then a quiet period yields an empty fallback tick.
    while !watcher.next().await.is_empty() {}
    assert!(watcher.next().await.is_empty());
    Ok(())
}
