//! What an agent's transcript says, line by line, as its reader reads it ([`LineReading`]: the
//! context now, a usage limit, the account's windows), and [`ContextTracker`], which keeps the
//! newest of each over a file, a tail or appends. The reader is the agent's own
//! (`claude::transcript::read_line`, `codex::rollout::read_line`); the rest is the same for all.

use super::limit::TranscriptNotice;

/// Token counts of a response, as Claude Code's `message.usage` and its status line give them
/// and a status-line feed file keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Tokens occupying the context window: everything sent as input, cached or not.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }
}

/// The last `max` bytes of an opened transcript, from its first whole line (a line cut at the
/// start of the window is no record).
pub fn tail(mut file: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let start = file.metadata()?.len().saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.take(max).read_to_end(&mut tail)?;
    if start > 0 {
        let cut = tail
            .iter()
            .position(|&b| b == b'\n')
            .map_or(tail.len(), |i| i + 1);
        tail.drain(..cut);
    }
    Ok(tail)
}

/// Where a used-token figure came from (its kebab-case name in JSON): the status line, or the
/// kind of transcript record that decided a [`ContextReading`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum UsageSource {
    Statusline,
    Assistant,
    CompactBoundary,
}

/// The current context usage as far as the records fed so far tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextReading {
    pub used_tokens: u64,
    pub model: Option<String>,
    pub source: UsageSource,
    /// The window the transcript itself states (Codex's rollout does); `None`: the model's.
    pub window: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRecord {
    pub found: TranscriptNotice,
    pub offset: u64,
}

/// A usage window's share (percent) and reset (unix ms), as a transcript reports it.
pub type WindowReading = (f64, Option<i64>);

/// The account's usage windows as a transcript line reports them (Codex writes them with each
/// response; Claude Code's go to its status line instead).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UsageWindows {
    pub five_hour: Option<WindowReading>,
    pub seven_day: Option<WindowReading>,
}

/// What one transcript line says, as an agent's reader reads it ([`read_line`] is Claude
/// Code's); the default says nothing.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LineReading {
    /// How full the context is now.
    pub usage: Option<ContextReading>,
    /// A real response came: a usage limit before it has lifted.
    pub answered: bool,
    /// The model the readings from here on are of.
    pub model: Option<String>,
    /// A usage limit reached.
    pub limit: Option<TranscriptNotice>,
    pub windows: Option<UsageWindows>,
}

/// Reads one line of an agent's transcript; `None`: nothing said.
pub type LineReader = fn(&[u8]) -> Option<LineReading>;

/// The newest of what a transcript's lines said, fed line by line.
#[derive(Debug, Clone)]
pub struct ContextTracker {
    reader: LineReader,
    current: Option<ContextReading>,
    last_model: Option<String>,
    limit: Option<LimitRecord>,
    windows: Option<UsageWindows>,
}

impl ContextTracker {
    /// A tracker of the transcript `reader` reads.
    pub fn reading_with(reader: LineReader) -> Self {
        Self {
            reader,
            current: None,
            last_model: None,
            limit: None,
            windows: None,
        }
    }

    /// A tracker of the same transcript, from nothing.
    pub fn fresh(&self) -> Self {
        Self::reading_with(self.reader)
    }

    pub fn feed_line(&mut self, line: &[u8], offset: u64) {
        let Some(said) = (self.reader)(line) else {
            return;
        };
        match said.limit {
            Some(found) => self.limit = Some(LimitRecord { found, offset }),
            None if said.answered => self.limit = None,
            None => {}
        }
        if let Some(model) = said.model {
            self.last_model = Some(model);
        }
        if let Some(reading) = said.usage {
            if reading.model.is_some() {
                self.last_model = reading.model.clone();
            }
            self.current = Some(ContextReading {
                model: reading.model.or_else(|| self.last_model.clone()),
                ..reading
            });
        }
        self.windows = said.windows.or(self.windows);
    }

    pub fn followed_by(self, later: ContextTracker) -> ContextTracker {
        let limit = (later.limit).or_else(|| self.limit.filter(|_| later.current.is_none()));
        let current = (later.current)
            .map(|r| ContextReading {
                model: r.model.or_else(|| self.last_model.clone()),
                ..r
            })
            .or(self.current);
        ContextTracker {
            reader: self.reader,
            current,
            last_model: later.last_model.or(self.last_model),
            limit,
            windows: later.windows.or(self.windows),
        }
    }

    pub fn limit(&self) -> Option<&LimitRecord> {
        self.limit.as_ref()
    }

    pub fn current(&self) -> Option<&ContextReading> {
        self.current.as_ref()
    }

    /// The account's usage windows as the newest line that had them said.
    pub fn windows(&self) -> Option<UsageWindows> {
        self.windows
    }
}

/// One turn, from its prompt to the end of the transcript: what wakebridge charges its own
/// texts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The prompt record's `uuid`: names the turn, so a second `Stop` of it replaces the first.
    pub prompt_id: String,
    pub prompt: String,
    /// Every token of every API call of the turn.
    pub tokens: u64,
    pub tools: u32,
}
