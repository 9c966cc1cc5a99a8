//! A real browser for the page's tests: Debian's headless Chromium (`.ci/run` installs it), with
//! a fresh profile and none of its calls home (this machine's network refuses them, many at a
//! time), driven over the DevTools protocol ([`Browser`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// Headless, no sandbox (CI runs as root), and nothing that calls out.
const QUIET_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,720",
];

/// How to get Chromium, for [`super::skip_or_fail`].
pub const GET_CHROMIUM: &str = "`apt-get install chromium` (.ci/run installs it), or set \
                                WB_TEST_CHROMIUM to a Chromium or Chrome";

/// `$WB_TEST_CHROMIUM`, else `chromium` on PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WB_TEST_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromium"))
        .find(|candidate| candidate.is_file())
}

/// A headless Chromium driven over the DevTools protocol (a WebSocket, JSON messages): one tab,
/// its console and load errors collected from the moment it opens.
pub struct Browser {
    child: std::process::Child,
    socket: WebSocketStream<TcpStream>,
    next_id: u64,
    /// The tab's protocol session.
    tab: String,
    /// Its console's errors and warnings, exceptions and failed loads, as they came.
    pub problems: Vec<String>,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts `chromium` on a blank tab and opens `url` in it.
    pub async fn open(chromium: &Path, url: &str) -> Browser {
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut child = std::process::Command::new(chromium)
            .args(QUIET_FLAGS)
            .args([
                "--remote-debugging-port=0",
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let stderr = child.stderr.take().unwrap();
        let (found, listening) = std::sync::mpsc::channel();
        // Chromium names its DevTools address on stderr; the rest is drained so it never blocks.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(address) = line.strip_prefix("DevTools listening on ") {
                    let _ = found.send(address.to_owned());
                }
            }
        });
        let address = listening
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium names its DevTools address within 30 s");
        let host = address["ws://".len()..]
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        let tcp = TcpStream::connect(&host).await.expect("DevTools accepts");
        let (socket, _) = tokio_tungstenite::client_async(address.as_str(), tcp)
            .await
            .expect("the DevTools handshake");
        let mut browser = Browser {
            child,
            socket,
            next_id: 0,
            tab: String::new(),
            problems: Vec::new(),
            _profile: profile,
        };
        let target = browser
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = browser
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        browser.tab = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            browser.call(domain, json!({})).await;
        }
        browser.call("Page.navigate", json!({"url": url})).await;
        browser
    }

    /// Runs `expression` in the tab (awaiting a promise it returns) and returns its value.
    pub async fn eval(&mut self, expression: &str) -> Value {
        let params = json!({"expression": expression, "awaitPromise": true, "returnByValue": true});
        let answer = self.call("Runtime.evaluate", params).await;
        if let Some(thrown) = answer.get("exceptionDetails") {
            panic!("{expression} threw: {thrown}");
        }
        answer["result"]["value"].clone()
    }

    /// Renders the tab as for a person who asked for `scheme` (`light` or `dark`).
    pub async fn prefer(&mut self, scheme: &str) {
        let features = json!([{"name": "prefers-color-scheme", "value": scheme}]);
        self.call("Emulation.setEmulatedMedia", json!({"features": features}))
            .await;
    }

    /// Writes what the tab shows to `file` as a PNG.
    pub async fn screenshot(&mut self, file: &Path) {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64_decode(shot["data"].as_str().expect("screenshot data"));
        std::fs::write(file, png).expect("the screenshot written");
    }

    /// Evaluates `expression` until it is true, every 50 ms, up to `limit`; how long it took.
    pub async fn until(&mut self, expression: &str, limit: Duration) -> Duration {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.eval(expression).await == Value::Bool(true) {
                return start.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let shown = self.eval("document.body.innerText").await;
        panic!("{expression} still not true after {limit:?}; the page shows: {shown}");
    }

    /// Sends one command (to the tab once it has one) and returns its result; the events that
    /// come meanwhile are kept where they tell of a problem.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.tab.is_empty() {
            message["sessionId"] = json!(self.tab);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .await
            .expect("DevTools takes a command");
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer within 30 s"))
                .expect("the DevTools socket stays open")
                .expect("a DevTools frame");
            let Message::Text(text) = frame else { continue };
            let answer: Value = serde_json::from_str(&text).expect("DevTools speaks JSON");
            if answer["id"] == id {
                assert!(answer["error"].is_null(), "{method}: {answer}");
                return answer["result"].clone();
            }
            self.note(&answer);
        }
    }

    fn note(&mut self, event: &Value) {
        let params = &event["params"];
        let problem = match event["method"].as_str() {
            Some("Runtime.consoleAPICalled")
                if matches!(
                    params["type"].as_str(),
                    Some("error" | "warning" | "assert")
                ) =>
            {
                format!("console.{}: {}", params["type"], params["args"])
            }
            Some("Runtime.exceptionThrown") => format!("exception: {}", params["exceptionDetails"]),
            Some("Log.entryAdded")
                if matches!(params["entry"]["level"].as_str(), Some("error" | "warning")) =>
            {
                format!("{}: {}", params["entry"]["source"], params["entry"]["text"])
            }
            _ => return,
        };
        self.problems.push(problem);
    }
}

/// Another site for a page to come from: a server on its own port answering every request with
/// a blank page (no policy of ours), for as long as the test runs.
pub async fn other_site() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let page = "<!doctype html><title>elsewhere</title>";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    address
}

/// Standard base64 (what DevTools sends binary data as), padding and all.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sextets: Vec<u32> = (text.bytes())
        .filter(|&b| b != b'=')
        .map(|b| ALPHABET.iter().position(|&a| a == b).expect("base64") as u32)
        .collect();
    let mut bytes = Vec::with_capacity(sextets.len() * 3 / 4);
    for chunk in sextets.chunks(4) {
        let word = (chunk.iter().enumerate()).fold(0, |word, (i, &s)| word | s << (18 - 6 * i));
        bytes.extend_from_slice(&word.to_be_bytes()[1..chunk.len()]);
    }
    bytes
}
