//! What the fleet key signs. A payload on the bus is `sha256=<hex HMAC>`, a newline, then the
//! JSON, so a reader checks the very bytes that were signed. The HMAC covers the bus event type
//! too, so a status can never be read as a command, nor a command as its answer.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::wire::signature::Secret;

/// Why a payload was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// Not signed with the fleet key (another key, altered, or not signed at all).
    Signature,
    /// Signed, but not the shape this version reads: why, from the JSON parser.
    Malformed(String),
}

/// `value` as a bus payload of event type `kind`, signed with `key`.
pub fn seal<T: Serialize>(kind: &str, value: &T, key: &Secret) -> String {
    // Serialising plain data cannot fail.
    let body = serde_json::to_string(value).unwrap_or_default();
    format!("{}\n{body}", key.sign(&signed_bytes(kind, &body)))
}

/// The value a payload of event type `kind` carries, once its signature holds.
pub fn open<T: DeserializeOwned>(kind: &str, payload: &str, key: &Secret) -> Result<T, Broken> {
    let (signature, body) = payload.split_once('\n').ok_or(Broken::Signature)?;
    if !key.verify(&signed_bytes(kind, body), Some(signature.as_bytes())) {
        return Err(Broken::Signature);
    }
    serde_json::from_str(body).map_err(|e| Broken::Malformed(e.to_string()))
}

fn signed_bytes(kind: &str, body: &str) -> Vec<u8> {
    format!("{kind}\n{body}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn a_sealed_value_opens_with_its_key_and_kind_only() {
        let key = Secret::new("fleet key");
        let sealed = seal("kind_a", &json!({"x": 1}), &key);
        assert_eq!(open::<Value>("kind_a", &sealed, &key), Ok(json!({"x": 1})));
        let other = Secret::new("another key");
        assert_eq!(
            open::<Value>("kind_a", &sealed, &other),
            Err(Broken::Signature)
        );
        assert_eq!(
            open::<Value>("kind_b", &sealed, &key),
            Err(Broken::Signature)
        );
        let altered = sealed.replace("1", "2");
        assert_eq!(
            open::<Value>("kind_a", &altered, &key),
            Err(Broken::Signature)
        );
        assert_eq!(
            open::<Value>("kind_a", "{\"x\": 1}", &key),
            Err(Broken::Signature)
        );
    }

    #[test]
    fn a_signed_body_of_the_wrong_shape_is_malformed() {
        let key = Secret::new("fleet key");
        let sealed = seal("kind", &json!({"x": "text"}), &key);
        assert!(matches!(
            open::<u32>("kind", &sealed, &key),
            Err(Broken::Malformed(_))
        ));
    }
}
