//! Load benchmark for `POST /hook` on the spool path (not a timed test: it prints figures).
//!
//! Starts the real release binary on a free loopback port with a private wake dir, drives it
//! with keep-alive connections from raw TCP clients (the lightest client we can write, so the
//! figures are the daemon's), and prints requests/s with p50/p90/p99/max latency.
//!
//!     cargo bench --bench hook_load                      # 16 connections, 1 session, 10 s
//!     WB_BENCH_SESSIONS=64 cargo bench --bench hook_load # spread over 64 sessions
//!
//! Knobs (environment): WB_BENCH_CONNS, WB_BENCH_SECS, WB_BENCH_SESSIONS, WB_BENCH_BACKEND
//! (spool | mux; mux with no panes.json measures the unmapped gate too).

// A benchmark stops on the first failure: unwrapping is how it says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn request_bytes(session: usize, event_id: u64) -> Vec<u8> {
    let body = format!(
        r#"{{"event_id": {event_id}, "event_type": "help_needed", "payload": "bench payload with some text in it", "session_id": "sender-1", "timestamp": "2026-11-30T10:57:47.114154", "channel": "session:bench-{session}", "correlation_id": null, "signal_level": "actionable"}}"#
    );
    format!(
        "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response; returns its status. Responses are small and carry Content-Length.
/// Parsed as bytes, without allocating: the client shares the two cores with the daemon, so
/// every microsecond it spends is one the daemon does not get.
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = &buf[..head_end];
        let length = head
            .split(|&b| b == b'\n')
            .find_map(|line| {
                let name = b"content-length:";
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                (line.len() > name.len() && line[..name.len()].eq_ignore_ascii_case(name))
                    .then(|| parse_digits(&line[name.len()..]))
            })
            .unwrap_or(0);
        if buf.len() >= head_end + 4 + length {
            // "HTTP/1.1 200 OK": the status is bytes 9..12.
            return Ok(head.get(9..12).map_or(0, |d| parse_digits(d) as u16));
        }
    }
}

fn parse_digits(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .filter(|b| b.is_ascii_digit())
        .fold(0, |n, b| n * 10 + usize::from(b - b'0'))
}

async fn client(addr: SocketAddr, conn: usize, sessions: usize, until: Instant) -> (Vec<u32>, u64) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut latencies_us = Vec::with_capacity(100_000);
    let mut errors = 0;
    let mut buf = Vec::with_capacity(1024);
    let mut i = 0u64;
    while Instant::now() < until {
        let session = (conn + i as usize) % sessions;
        let req = request_bytes(session, (conn as u64) << 32 | i);
        let start = Instant::now();
        stream.write_all(&req).await.expect("write");
        match read_response(&mut stream, &mut buf).await {
            Ok(200) => latencies_us.push(start.elapsed().as_micros() as u32),
            _ => errors += 1,
        }
        i += 1;
    }
    (latencies_us, errors)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[idx]) / 1000.0
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let conns = knob("WB_BENCH_CONNS", 16) as usize;
    let secs = knob("WB_BENCH_SECS", 10);
    let sessions = knob("WB_BENCH_SESSIONS", 1) as usize;
    let backend = std::env::var("WB_BENCH_BACKEND").unwrap_or_else(|_| "spool".into());
    let root = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let run_dir = root.path().join("run");
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_wakebridge"))
        .args(["serve", "--port", &port.to_string(), "--backend", &backend])
        .env("AGENT_EVENT_BUS_WAKE_DIR", root.path().join("wake"))
        .env("XDG_RUNTIME_DIR", &run_dir)
        .env("XDG_STATE_HOME", root.path().join("state"))
        .env("XDG_CONFIG_HOME", root.path().join("config"))
        .env("WAKEBRIDGE_REGISTRATION__ENABLED", "false")
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start the release binary");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let ready = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < ready, "daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let rss_idle = rss_kib(daemon.id());
    // One client thread driving every connection (as `wrk -t1` does): the daemon keeps the
    // second core.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let until = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let pid = daemon.id();
    let (mut all, errors, rss_peak) = runtime.block_on(async move {
        let tasks: Vec<_> = (0..conns)
            .map(|c| tokio::spawn(client(addr, c, sessions, until)))
            .collect();
        let sampler = tokio::spawn(async move {
            let mut peak = 0;
            while Instant::now() < until {
                peak = peak.max(rss_kib(pid));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peak
        });
        let mut all = Vec::new();
        let mut errors = 0;
        for t in tasks {
            let (lat, err) = t.await.expect("client");
            all.extend(lat);
            errors += err;
        }
        (all, errors, sampler.await.unwrap_or(0))
    });
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let lines = count_lines(&root.path().join("wake"));
    println!(
        "hook_load backend={backend} conns={conns} sessions={sessions} secs={secs}: {:.0} req/s, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {errors}, spooled lines {lines}, RSS idle {} KiB, peak {} KiB",
        all.len() as f64 / elapsed,
        percentile(&all, 0.50),
        percentile(&all, 0.90),
        percentile(&all, 0.99),
        percentile(&all, 1.0),
        rss_idle,
        rss_peak,
    );
    assert_eq!(
        lines as usize,
        all.len(),
        "every 200 must be a spooled line"
    );
    let _ = daemon.kill();
    let _ = daemon.wait();
}

fn count_lines(wake: &Path) -> u64 {
    std::fs::read_dir(wake)
        .map(|d| {
            d.filter_map(std::result::Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
                .map(|e| {
                    std::fs::read(e.path())
                        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
                        .unwrap_or(0)
                })
                .sum()
        })
        .unwrap_or(0)
}
