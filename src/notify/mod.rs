//! Telling a human (`[notify]`): the settings ([`NotifyConfig`]), the hourly cap ([`HourlyCap`])
//! and the words ([`message`]), all pure; [`task`] sends.

pub mod task;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::NotifySettings;
use crate::telemetry::notice::{Notice, NoticeKind};

const HOUR: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum Format {
    /// The text as the body, `Title` and `Tags` headers (ntfy and friends).
    Plain,
    /// `{"text": "..."}` (Slack-compatible incoming webhooks).
    Json,
}

#[derive(Debug, Clone)]
pub struct NotifyConfig {
    pub url: Option<url::Url>,
    pub format: Format,
    pub bus: bool,
    pub max_per_hour: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotifyError {
    #[error(
        "notify.url {url:?} is not an http(s) URL ({problem}); set it to a webhook such as \
         https://ntfy.sh/<topic>, or empty to turn notifications off (WAKEBRIDGE_NOTIFY__URL)"
    )]
    Url { url: String, problem: String },
    #[error(
        "notify.format {0:?} is not a format: use \"plain\" or \"json\" (WAKEBRIDGE_NOTIFY__FORMAT)"
    )]
    Format(String),
    #[error(
        "notify.max_per_hour is 0, so nothing would ever be sent: use 1 or more, or empty notify.url and bus = false to turn notifications off"
    )]
    NoneAllowed,
}

impl NotifyConfig {
    /// `Ok(None)` when notifications are off.
    pub fn from_settings(s: &NotifySettings) -> Result<Option<NotifyConfig>, NotifyError> {
        let url = match s.url.trim() {
            "" => None,
            text => {
                let bad = |problem: String| NotifyError::Url {
                    url: text.to_owned(),
                    problem,
                };
                let url = url::Url::parse(text).map_err(|e| bad(e.to_string()))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(bad(format!("scheme {}", url.scheme())));
                }
                Some(url)
            }
        };
        let format = (s.format.trim().parse())
            .map_err(|_| NotifyError::Format(s.format.trim().to_owned()))?;
        if url.is_none() && !s.bus {
            return Ok(None);
        }
        if s.max_per_hour == 0 {
            return Err(NotifyError::NoneAllowed);
        }
        Ok(Some(NotifyConfig {
            url,
            format,
            bus: s.bus,
            max_per_hour: s.max_per_hour,
        }))
    }
}

/// At most `max_per_hour` notices an hour in all (the gap between two of a kind for one session
/// is the session's own: `session::gate::Gate::notify`).
#[derive(Debug)]
pub struct HourlyCap {
    max_per_hour: usize,
    sent: VecDeque<Instant>,
}

impl HourlyCap {
    pub fn new(max_per_hour: u32) -> HourlyCap {
        HourlyCap {
            max_per_hour: max_per_hour as usize,
            sent: VecDeque::new(),
        }
    }

    /// Whether a notice may go out at `now`; if so it is counted as sent.
    pub fn admit(&mut self, now: Instant) -> bool {
        self.sent.retain(|at| now.duration_since(*at) < HOUR);
        let room = self.sent.len() < self.max_per_hour;
        if room {
            self.sent.push_back(now);
        }
        room
    }
}

/// The message's title and text: the session's short id and project, what happened, the detail.
pub fn message(notice: &Notice, project: Option<&str>) -> (String, String) {
    let short = notice.session_id.get(..8).unwrap_or(&notice.session_id);
    let who = match project {
        Some(project) => format!("{short} ({project})"),
        None => short.to_owned(),
    };
    let what = match notice.kind {
        NoticeKind::AcknowledgedIdle => "stopped answering nudges; left alone until it shows life",
        NoticeKind::UsageLimit => "hit its usage limit; held until it resets",
        NoticeKind::Checkpoint => "reached the checkpoint threshold of its context window",
        NoticeKind::Resumed => "was resumed after its usage limit reset",
        NoticeKind::WakeFailing => "could not be woken three times in a row",
    };
    let title = format!("wakebridge: {who}");
    let text = match notice.detail.as_str() {
        "" => format!("{who} {what}"),
        detail => format!("{who} {what} ({detail})"),
    };
    (title, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str, format: &str, bus: bool, max: u32) -> NotifySettings {
        NotifySettings {
            url: url.into(),
            format: format.into(),
            bus,
            min_gap: Duration::from_secs(900),
            max_per_hour: max,
        }
    }

    #[test]
    fn settings_turn_it_on_off_or_say_what_is_wrong() {
        assert!(
            NotifyConfig::from_settings(&settings("", "plain", false, 20))
                .unwrap()
                .is_none()
        );
        let on = NotifyConfig::from_settings(&settings("https://ntfy.sh/t", "json", false, 20))
            .unwrap()
            .unwrap();
        assert_eq!(on.format, Format::Json);
        assert!(
            NotifyConfig::from_settings(&settings("", "plain", true, 20))
                .unwrap()
                .is_some_and(|c| c.url.is_none() && c.bus)
        );
        let e = NotifyConfig::from_settings(&settings("ftp://x", "plain", false, 20)).unwrap_err();
        assert!(e.to_string().contains("WAKEBRIDGE_NOTIFY__URL"), "{e}");
        assert!(NotifyConfig::from_settings(&settings("not a url", "plain", false, 20)).is_err());
        assert_eq!(
            NotifyConfig::from_settings(&settings("http://h/", "xml", false, 20)).unwrap_err(),
            NotifyError::Format("xml".into())
        );
        assert_eq!(
            NotifyConfig::from_settings(&settings("http://h/", "plain", false, 0)).unwrap_err(),
            NotifyError::NoneAllowed
        );
    }

    #[test]
    fn a_cap_an_hour_for_every_notice() {
        let mut cap = HourlyCap::new(3);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(cap.admit(at(0)) && cap.admit(at(61)) && cap.admit(at(62)));
        assert!(!cap.admit(at(63)), "three in the hour already");
        assert!(cap.admit(at(3601)), "an hour on, room again");
    }

    #[test]
    fn the_message_is_our_words_with_the_short_id_and_project() {
        let notice = Notice::new(
            "067fd316-8cc7-5cb1-861f-4d9d67ba7ee8",
            NoticeKind::UsageLimit,
            "resets 3pm",
        );
        let (title, text) = message(&notice, Some("wakebridge"));
        assert_eq!(title, "wakebridge: 067fd316 (wakebridge)");
        assert_eq!(
            text,
            "067fd316 (wakebridge) hit its usage limit; held until it resets (resets 3pm)"
        );
        let (_, bare) = message(&Notice::new("short", NoticeKind::WakeFailing, ""), None);
        assert_eq!(bare, "short could not be woken three times in a row");
    }
}
