//! Where log lines go, without ever stopping the daemon: lines go through a bounded queue to one
//! writer thread that drops (and counts) what does not fit and ignores write errors. Under
//! systemd's journal, lines carry a `<N>` priority and no timestamp. `outln!`/`errln!` are
//! `println!`/`eprintln!` without the panic on a broken pipe.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{Format, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::env::Env;

/// `<device>:<inode>` of the journal stream systemd connects a service's stdout and stderr to.
const JOURNAL_STREAM_ENV: &str = "JOURNAL_STREAM";

/// Lines waiting for the writer thread; beyond it (a stuck reader) lines are dropped.
const QUEUE_LINES: usize = 4096;
/// How long `flush` waits at shutdown: enough for a healthy reader, not for a stuck one.
pub const FLUSH_BUDGET: Duration = Duration::from_millis(500);

/// `println!` that never panics: a closed or broken stdout is not worth dying for.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that never panics (see `outln!`).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

/// Makes descriptors 0, 1 and 2 valid (`/dev/null` for a closed one), before anything opens a
/// file: with `2>&-` the first file would be fd 2 and get every log line.
pub fn ensure_standard_descriptors() {
    for fd in 0..=2 {
        // SAFETY: fcntl(F_GETFD) only queries the descriptor table.
        let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
        if closed {
            // open(2) returns the lowest free descriptor, the closed one; kept open for good.
            // SAFETY: a NUL-terminated literal path; the flags are plain constants.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
}

struct Sink {
    lines: SyncSender<Vec<u8>>,
    /// Lines queued and not yet written (or given up on).
    queued: Arc<AtomicUsize>,
    dropped: AtomicU64,
}

static SINK: OnceLock<Sink> = OnceLock::new();

/// Installs the global subscriber (once): colour on a terminal, the journal's format on it.
pub fn init(debug: bool, env: &Env) {
    let filter = if debug {
        EnvFilter::new("debug")
    } else {
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
    };
    let Some(sink) = sink() else {
        return;
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || sink)
        .log_internal_errors(false);
    let _ = if stderr_is_journal(env) {
        builder
            .with_ansi(false)
            .event_format(Journald(Format::default().without_time()))
            .try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
}

/// Whether fd 2 is the stream `JOURNAL_STREAM` names (a redirected stderr inherits the variable
/// but not the stream).
fn stderr_is_journal(env: &Env) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let named = env.get(JOURNAL_STREAM_ENV);
    let Some(named) = named.as_deref().and_then(parse_stream) else {
        return false;
    };
    // A duplicate of fd 2, so it can be stat'ed as a File and closed without closing stderr.
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| (m.dev(), m.ino()) == named)
}

fn parse_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.trim().split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The syslog priority journald reads from a `<N>` line prefix.
fn priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// Formats an event as `inner` does, behind its level's `<N>` priority prefix.
struct Journald<F>(F);

impl<S, N, F> FormatEvent<S, N> for Journald<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "<{}>", priority(*event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

/// The sink, started on first use; `None` (logging off) if its thread cannot start.
fn sink() -> Option<&'static Sink> {
    if let Some(sink) = SINK.get() {
        return Some(sink);
    }
    let (lines, rx) = mpsc::sync_channel::<Vec<u8>>(QUEUE_LINES);
    let queued = Arc::new(AtomicUsize::new(0));
    let written = queued.clone();
    std::thread::Builder::new()
        .name("wakebridge-log".into())
        .spawn(move || {
            let mut stderr = std::io::stderr();
            for line in rx {
                let _ = stderr.write_all(&line);
                written.fetch_sub(1, Ordering::Release);
            }
        })
        .ok()?;
    Some(SINK.get_or_init(|| Sink {
        lines,
        queued,
        dropped: AtomicU64::new(0),
    }))
}

/// Waits up to `budget` for queued lines to be written; returns whether all were.
pub fn flush(budget: Duration) -> bool {
    let Some(sink) = SINK.get() else {
        return true;
    };
    let deadline = Instant::now() + budget;
    while sink.queued.load(Ordering::Acquire) > 0 {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Log lines dropped because the reader did not keep up.
pub fn dropped_lines() -> u64 {
    SINK.get().map_or(0, |s| s.dropped.load(Ordering::Relaxed))
}

/// One event's bytes: `tracing-subscriber` formats a whole line and writes it at once. Queued,
/// or dropped (and counted) when the queue is full.
impl Write for &Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.queued.fetch_add(1, Ordering::Acquire);
        if self.lines.try_send(buf.to_vec()).is_err() {
            self.queued.fetch_sub(1, Ordering::Release);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn journal_lines_carry_the_priority_and_no_timestamp() {
        let buffer = Buffer::default();
        let out = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .event_format(Journald(Format::default().without_time()))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(session_id = "abc", "a warning");
            tracing::error!("an error");
            tracing::info!("news");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("<4> WARN "), "{text}");
        assert!(lines[0].contains("a warning session_id=\"abc\""), "{text}");
        assert!(lines[1].starts_with("<3>ERROR "), "{text}");
        assert!(lines[2].starts_with("<6> INFO "), "{text}");
    }

    #[test]
    fn journal_stream_is_the_device_and_inode() {
        assert_eq!(parse_stream("8:1234"), Some((8, 1234)));
        assert_eq!(parse_stream(" 8:1234\n"), Some((8, 1234)));
        assert_eq!(parse_stream("8"), None);
        assert_eq!(parse_stream("x:1"), None);
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let fd = std::io::stderr().as_fd().try_clone_to_owned().unwrap();
        let m = std::fs::File::from(fd).metadata().unwrap();
        let ours = format!("{}:{}", m.dev(), m.ino());
        let with = |value: &str| Env::from_pairs([(JOURNAL_STREAM_ENV, value)]);
        assert!(stderr_is_journal(&with(&ours)));
        // The variable alone is not enough: a stream fd 2 is not.
        assert!(!stderr_is_journal(&with(&format!(
            "{}:{}",
            m.dev(),
            m.ino() + 1
        ))));
        assert!(!stderr_is_journal(&Env::empty()));
    }
}
