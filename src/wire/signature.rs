//! The webhook signature (`sha256=<hex HMAC-SHA256(secret, body)>`, checked in constant time) and
//! the secret, whose `Debug` never shows it.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

pub const SIGNATURE_HEADER: &str = "x-event-bus-signature";
const PREFIX: &str = "sha256=";

/// The shared webhook secret. Cloning is cheap enough; printing it shows nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for registering the webhook and comparing bearer tokens.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `sha256=<lowercase hex>` over `body`: exactly what the bus sends.
    pub fn sign(&self, body: &[u8]) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(self.0.as_bytes())
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(body);
        format!("{PREFIX}{}", hex::encode(mac.finalize().into_bytes()))
    }

    /// Whether `header` is the signature of `body`: the whole `sha256=<hex>` compared in
    /// constant time, so bare or uppercase hex fails.
    pub fn verify(&self, body: &[u8], header: Option<&[u8]>) -> bool {
        let Some(given) = header else { return false };
        let expected = self.sign(body);
        expected.as_bytes().ct_eq(given).into()
    }

    /// Constant-time comparison of a bearer token with the secret.
    pub fn matches_token(&self, token: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(token).into()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The captured DM from the real bus (bus-wire-observed.md, second dump), secret
    /// `s3cret-test`, whose signature `openssl dgst -hmac` confirmed.
    const OBSERVED_BODY: &str = r#"{"event_id": 8, "event_type": "task_completed", "payload": "raw bytes test", "session_id": "anonymous", "timestamp": "2026-11-30T11:04:37.291908", "channel": "session:rawtest-1", "correlation_id": null, "signal_level": "actionable"}"#;
    const OBSERVED_SIGNATURE: &str =
        "sha256=cd014ef707298ba9deb6dd7572f6c7a28bf200ed23c71b68e56ff6630e5a188e";

    #[test]
    fn signs_exactly_like_the_real_bus() {
        let secret = Secret::new("s3cret-test");
        assert_eq!(secret.sign(OBSERVED_BODY.as_bytes()), OBSERVED_SIGNATURE);
        assert!(secret.verify(
            OBSERVED_BODY.as_bytes(),
            Some(OBSERVED_SIGNATURE.as_bytes())
        ));
    }

    #[test]
    fn rejects_missing_bare_uppercase_wrong_key_and_non_ascii() {
        let secret = Secret::new("s3cret-test");
        let body = OBSERVED_BODY.as_bytes();
        let bare = OBSERVED_SIGNATURE.trim_start_matches(PREFIX);
        let upper = format!("{PREFIX}{}", bare.to_uppercase());
        assert!(!secret.verify(body, None));
        assert!(!secret.verify(body, Some(bare.as_bytes())));
        assert!(!secret.verify(body, Some(upper.as_bytes())));
        assert!(!secret.verify(body, Some(b"sha256=caf\xe9")));
        assert!(!Secret::new("other").verify(body, Some(OBSERVED_SIGNATURE.as_bytes())));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        assert!(!format!("{:?}", Secret::new("hunter2")).contains("hunter2"));
    }
}
