//! A program on a real pseudo-terminal with no multiplexer anywhere: what a person gets who runs
//! `claude` straight in a terminal emulator (or over ssh), with no tmux or zellij pane for
//! wakebridge to find or type into.
//!
//! [`Pty::spawn`] opens a pty pair with `openpty(3)` at a fixed window size, starts the program
//! with the slave as its stdin, stdout and stderr, in a session of its own with the slave as its
//! controlling terminal (`setsid()`, `ioctl(TIOCSCTTY)`), and with exactly the environment it is
//! given (nothing inherited, so no `TMUX`, `TMUX_PANE` or `ZELLIJ*` can leak in from the test's
//! own terminal). A thread keeps reading the master so the program never blocks on a full pty
//! buffer, and keeps the last [`KEPT_OUTPUT`] bytes of raw output for waits and failure
//! messages. Keys go in through the master ([`Pty::type_text`], [`Pty::press_enter`],
//! [`Pty::submit`]). Dropping the guard kills the program's process group and reaps it.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How much raw output is kept: enough for a few full redraws of a 50x200 screen.
pub const KEPT_OUTPUT: usize = 64 * 1024;

/// The window the program sees (rows, columns).
pub const SIZE: (u16, u16) = (50, 200);

/// How long a person's hand rests between typing a line and pressing Enter.
pub const TYPING_PAUSE: Duration = Duration::from_millis(500);

/// A program running on the slave side of a pty; the test holds the master.
pub struct Pty {
    child: Child,
    /// The master, for writing keys (the reader thread has its own duplicate).
    master: std::fs::File,
    output: Arc<Mutex<VecDeque<u8>>>,
}

impl Pty {
    /// Starts `program` with `args` in `dir` on a new pty of [`SIZE`], with `env` as its whole
    /// environment.
    pub fn spawn<I, K, V>(program: &Path, args: &[&str], dir: &Path, env: I) -> Pty
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        super::timeout::arm_test_timeout();
        let (master, slave) = open_pty(SIZE);
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("duplicate the pty slave"));
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(env)
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe
        // calls are allowed: setsid(2) and ioctl(2) are, and it allocates nothing. std has
        // already dup2'd the slave onto 0, 1 and 2 when it runs.
        unsafe {
            command.pre_exec(|| {
                // A session of its own, so the pty can become its controlling terminal (and its
                // process group is the one `Drop` kills).
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("start {} on a pty: {e}", program.display()));
        // The parent's copies of the slave go, so the master reads EIO (the reader's end) once
        // the program and everything it started have closed it.
        drop(command);
        drop(slave);
        let output: Arc<Mutex<VecDeque<u8>>> = Arc::default();
        let reader = master.try_clone().expect("duplicate the pty master");
        let kept = output.clone();
        std::thread::Builder::new()
            .name("pty-reader".into())
            .spawn(move || read_all(std::fs::File::from(reader), &kept))
            .expect("start the pty reader");
        Pty {
            child,
            master: std::fs::File::from(master),
            output,
        }
    }

    /// The program's pid (the leader of its session and process group).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The raw output kept so far (escape sequences and all), decoded lossily.
    pub fn raw(&self) -> String {
        let output = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = output.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }

    /// The kept output with escape sequences and control characters taken out: not a rendered
    /// screen (cursor moves are lost), but readable in a failure message.
    pub fn text(&self) -> String {
        without_escapes(&self.raw())
    }

    /// The last `chars` characters of [`Pty::text`], for failure messages.
    pub fn tail(&self, chars: usize) -> String {
        let text = self.text();
        let skip = text.chars().count().saturating_sub(chars);
        text.chars().skip(skip).collect()
    }

    /// Whether the program is still running (not exited, nor a zombie awaiting `Drop`).
    pub fn running(&self) -> bool {
        i32::try_from(self.pid()).is_ok_and(super::process::process_is_running)
    }

    /// Types `text` as keys (no Enter).
    pub fn type_text(&self, text: &str) {
        self.write(text.as_bytes());
    }

    /// Presses Enter: a carriage return, as a terminal sends it.
    pub fn press_enter(&self) {
        self.write(b"\r");
    }

    /// Types `text` the way a person does: the line, a pause, then Enter.
    pub async fn submit(&self, text: &str) {
        self.type_text(text);
        tokio::time::sleep(TYPING_PAUSE).await;
        self.press_enter();
    }

    fn write(&self, bytes: &[u8]) {
        let mut master = &self.master;
        master
            .write_all(bytes)
            .and_then(|()| master.flush())
            .unwrap_or_else(|e| panic!("write to the pty: {e}\n{}", self.tail(2000)));
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap_or(0);
        if pid > 0 {
            // SAFETY: kill(2) takes plain integers; a negative pid names the process group the
            // child leads since its setsid(), so what it started there goes too. The child is
            // not reaped yet, so its pid (and group id) cannot have been reused.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A new pty pair of `size` (rows, columns), both ends close-on-exec so no other child the test
/// process starts keeps a copy (the slave reaches the program through its stdio only).
fn open_pty((rows, cols): (u16, u16)) -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave): (libc::c_int, libc::c_int) = (-1, -1);
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: the two out-pointers point at live c_ints; no name buffer is asked for (null);
    // the termios pointer may be null (the default settings) and the winsize one points at a
    // live value that openpty only reads.
    let opened = unsafe {
        libc::openpty(
            &raw mut master,
            &raw mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &raw const size,
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty succeeded, so both are open descriptors that nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // openpty(3) has no close-on-exec flag: set it at once. (A child another test thread forks
    // in between keeps a copy until it execs; that only delays the reader's EIO.)
    for fd in [&master, &slave] {
        // SAFETY: fcntl(2) on a descriptor this function owns, with plain integer arguments.
        let set = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        assert_ne!(set, -1, "FD_CLOEXEC: {}", std::io::Error::last_os_error());
    }
    (master, slave)
}

/// Reads `master` until the pty closes (EIO once no process holds the slave), keeping the last
/// [`KEPT_OUTPUT`] bytes.
fn read_all(mut master: std::fs::File, kept: &Mutex<VecDeque<u8>>) {
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                kept.extend(&buf[..n]);
                let over = kept.len().saturating_sub(KEPT_OUTPUT);
                kept.drain(..over);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// `raw` without CSI, OSC and other escape sequences, nor control characters other than
/// newlines; carriage returns become newlines.
pub fn without_escapes(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC, DCS, APC, PM, SOS: up to BEL or ST (ESC \).
                Some(']' | 'P' | '_' | '^' | 'X') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                // A charset designation takes one more character.
                Some('(' | ')' | '*' | '+') => {
                    chars.next();
                }
                _ => {}
            },
            '\r' | '\n' => {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn escapes_are_taken_out_and_text_kept() {
    let raw =
        "\u{1b}[?25l\u{1b}]0;title\u{7}\u{1b}[1;1H\u{276f} hi\r\n\u{1b}[38;5;2mok\u{1b}[0m\u{1b}(B";
    assert_eq!(without_escapes(raw), "\u{276f} hi\nok");
}
