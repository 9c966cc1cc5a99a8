//! Transcript benchmark (`cargo bench --bench transcript`, harness = false): prints figures.
//!
//! 1. Current context of a generated 1 GB transcript vs a 10 MB one through `TranscriptFollower`
//!    (tail read): the time should not depend on the file size. A full parse is timed too, for
//!    scale.
//! 2. 50 followed transcripts receiving 10 000 appended records: CPU time of the polls, for two
//!    record sizes, to show the cost follows the bytes appended.
//!
//! Files are generated in a temp dir (deleted afterwards) from a repeated block, so generation
//! runs at disk-write speed.

// A benchmark stops on the first failure: unwrapping is how it says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use wakebridge::agent::Agent;
use wakebridge::claude::transcript::read_line;
use wakebridge::context::follow::TranscriptFollower;
use wakebridge::reading::transcript::ContextTracker;

/// Size of the large transcript: the "multi-GB history" case, scaled to fit a test machine.
const LARGE_BYTES: u64 = 1 << 30;
/// Size of the small transcript the large one is compared with.
const SMALL_BYTES: u64 = 10 << 20;
/// Fresh followers timed per file; the median is reported.
const TAIL_RUNS: usize = 21;
/// Followed transcripts in the append benchmark.
const FOLLOWED: usize = 50;
/// Records appended across all followed transcripts.
const APPENDED_RECORDS: usize = 10_000;

type BenchResult = Result<(), Box<dyn std::error::Error>>;

fn user_line(i: usize, pad: usize) -> String {
    format!(
        r#"{{"parentUuid":"p{i}","isSidechain":false,"type":"user","sessionId":"s","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{i}","content":"{}"}}]}},"uuid":"u{i}","timestamp":"2026-11-30T09:00:00.000Z"}}"#,
        "x".repeat(pad)
    )
}

fn assistant_line(i: usize, tokens: u64, pad: usize) -> String {
    format!(
        r#"{{"parentUuid":"u{i}","isSidechain":false,"type":"assistant","sessionId":"s","requestId":"req_{i}","message":{{"id":"msg_{i}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"{}"}}],"stop_reason":"end_turn","usage":{{"input_tokens":4,"cache_creation_input_tokens":100,"cache_read_input_tokens":{tokens},"output_tokens":50}}}},"uuid":"a{i}","timestamp":"2026-11-30T09:00:01.000Z"}}"#,
        "y".repeat(pad)
    )
}

/// About 1 MiB of a plausible session: tool results of a few KB, assistant turns between them.
fn block() -> Vec<u8> {
    let mut out = Vec::with_capacity(1 << 20);
    let mut i = 0;
    while out.len() < (1 << 20) {
        out.extend_from_slice(user_line(i, 3000 + (i * 37) % 4000).as_bytes());
        out.push(b'\n');
        out.extend_from_slice(assistant_line(i, 10_000 + i as u64, 200).as_bytes());
        out.push(b'\n');
        i += 1;
    }
    out
}

/// Writes a transcript of at least `size` bytes whose last assistant record says 123 456 tokens,
/// followed by one user record (so the tail search has to look past a non-deciding line).
fn generate(path: &Path, size: u64, block: &[u8]) -> std::io::Result<u64> {
    let mut w = BufWriter::with_capacity(4 << 20, File::create(path)?);
    let mut written = 0u64;
    while written < size {
        w.write_all(block)?;
        written += block.len() as u64;
    }
    writeln!(w, "{}", assistant_line(0, 123_352, 200))?;
    writeln!(w, "{}", user_line(1, 5000))?;
    w.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

/// The reading of a whole transcript parsed line by line, as a tail-less reader would.
fn full_parse(bytes: &[u8]) -> Option<u64> {
    let mut tracker = ContextTracker::reading_with(read_line);
    let mut offset = 0u64;
    for line in bytes.split(|&b| b == b'\n') {
        tracker.feed_line(line, offset);
        offset += line.len() as u64 + 1;
    }
    tracker.current().map(|r| r.used_tokens)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn tail_figures(path: &Path) -> Result<(Duration, u64, u64), Box<dyn std::error::Error>> {
    let mut times = Vec::new();
    let mut bytes = 0;
    let mut used = 0;
    for _ in 0..TAIL_RUNS {
        let start = Instant::now();
        let mut f = TranscriptFollower::new(path, Agent::Claude);
        let outcome = f.poll()?;
        times.push(start.elapsed());
        bytes = outcome.bytes_read;
        used = f.current().map(|r| r.used_tokens).unwrap_or(0);
    }
    Ok((median(times), bytes, used))
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_THREAD_CPUTIME_ID is valid.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Appends `APPENDED_RECORDS` records of about `pad` bytes round-robin to `FOLLOWED` files,
/// polling every follower after each round. Returns (bytes appended, CPU in polls, idle-poll CPU).
fn append_run(
    dir: &Path,
    pad: usize,
) -> Result<(u64, Duration, Duration), Box<dyn std::error::Error>> {
    let mut followers = Vec::new();
    let mut writers = Vec::new();
    for n in 0..FOLLOWED {
        let path = dir.join(format!("follow-{pad}-{n}.jsonl"));
        let mut initial = String::new();
        for i in 0..20 {
            initial.push_str(&user_line(i, 2000));
            initial.push('\n');
            initial.push_str(&assistant_line(i, 1000, 100));
            initial.push('\n');
        }
        std::fs::write(&path, initial)?;
        let mut f = TranscriptFollower::new(&path, Agent::Claude);
        f.poll()?;
        followers.push(f);
        writers.push(OpenOptions::new().append(true).open(&path)?);
    }
    let idle_start = thread_cpu();
    for f in &mut followers {
        f.poll()?;
    }
    let idle = (thread_cpu() - idle_start) / FOLLOWED as u32;

    let rounds = APPENDED_RECORDS / FOLLOWED;
    let mut appended = 0u64;
    let mut poll_cpu = Duration::ZERO;
    for round in 0..rounds {
        for w in &mut writers {
            // Half assistant records (parsed), half user records (skipped by the pre-filter).
            let line = if round % 2 == 0 {
                assistant_line(round, 2000 + round as u64, pad)
            } else {
                user_line(round, pad)
            };
            w.write_all(line.as_bytes())?;
            w.write_all(b"\n")?;
            appended += line.len() as u64 + 1;
        }
        let start = thread_cpu();
        for f in &mut followers {
            f.poll()?;
        }
        poll_cpu += thread_cpu() - start;
    }
    let last_assistant_round = (0..rounds).rev().find(|r| r % 2 == 0).unwrap_or(0);
    // Usage is input 4 + cache creation 100 + cache read.
    let expected = 2000 + last_assistant_round as u64 + 104;
    for f in &followers {
        if f.current().map(|r| r.used_tokens) != Some(expected) {
            return Err(format!("follower {} lost a record", f.path().display()).into());
        }
    }
    Ok((appended, poll_cpu, idle))
}

fn main() -> BenchResult {
    let dir = tempfile::tempdir()?;
    let block = block();

    println!("== current context from the tail ==");
    let mut results = Vec::new();
    for (name, size) in [("10 MB", SMALL_BYTES), ("1 GB", LARGE_BYTES)] {
        let path = dir.path().join(format!("{}.jsonl", size));
        let gen_start = Instant::now();
        let actual = generate(&path, size, &block)?;
        let generation = gen_start.elapsed();
        let (t, bytes, used) = tail_figures(&path)?;
        println!(
            "{name:>6}: {actual} bytes generated in {generation:.2?}; tail poll median {t:.2?} over {TAIL_RUNS} runs, {bytes} bytes read, used_tokens {used}"
        );
        if used != 123_456 {
            return Err(format!("wrong reading {used} for {name}").into());
        }
        let full_start = Instant::now();
        let full = full_parse(&std::fs::read(&path)?);
        println!(
            "{name:>6}: for scale, reading + parsing the whole file: {:.2?} (used_tokens {full:?})",
            full_start.elapsed()
        );
        results.push(t);
        std::fs::remove_file(&path)?;
    }
    if let [small, large] = results[..] {
        println!(
            "ratio 1 GB / 10 MB tail time: {:.2} (size ratio {:.0})",
            large.as_secs_f64() / small.as_secs_f64().max(1e-9),
            LARGE_BYTES as f64 / SMALL_BYTES as f64
        );
    }

    println!("== {APPENDED_RECORDS} records appended to {FOLLOWED} followed transcripts ==");
    for pad in [500usize, 4000] {
        let (bytes, cpu, idle) = append_run(dir.path(), pad)?;
        println!(
            "records ~{pad} B: {bytes} bytes appended, poll CPU {cpu:.2?} = {:.2} us/KiB, {:.2} us/record; idle poll {idle:.2?} per follower",
            cpu.as_secs_f64() * 1e6 / (bytes as f64 / 1024.0),
            cpu.as_secs_f64() * 1e6 / APPENDED_RECORDS as f64,
        );
    }
    Ok(())
}
