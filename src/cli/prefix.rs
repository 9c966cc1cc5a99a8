//! Session ids as a person types them: any unique prefix of a known id names that session
//! (`wake`, `rewind --session`, `forget`, `context --session`). A full id (a UUID, as Claude
//! Code's are) passes unchanged without asking the daemon, so `wakebridge wake <uuid>` keeps the
//! Python bridge's contract even for a session the daemon has not seen.

use crate::cli::glance::short_ids;

/// Most matches an ambiguity error lists; the rest are counted.
const LISTED_MATCHES: usize = 5;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("no session starts with {given:?}; `wakebridge status --all` lists them")]
    NoMatch { given: String },
    #[error("{given:?} matches {matches}; type more characters")]
    Ambiguous { given: String, matches: String },
}

/// A UUID (8-4-4-4-12 hex digits), as Claude Code's session ids are.
pub fn is_full_id(id: &str) -> bool {
    let hex = |part: &str, len| part.len() == len && part.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = id.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(part, len)| hex(part, len))
}

/// The id `given` names among `known`: itself when it is known or a full id, else the one known
/// full id it starts. Only full ids (the ones `status` shortens) are completed: a bus session
/// may be named anything, and `rawtest-1` must not become a known `rawtest-10`; so a given id
/// that is not a prefix of a UUID goes to the daemon as typed.
pub fn resolve(given: &str, known: &[&str]) -> Result<String, PrefixError> {
    if known.contains(&given) || is_full_id(given) {
        return Ok(given.to_owned());
    }
    let mut matches: Vec<&str> = (known.iter().copied())
        .filter(|id| is_full_id(id) && !given.is_empty() && id.starts_with(given))
        .collect();
    matches.sort_unstable();
    matches.dedup();
    let given = given.to_owned();
    match matches.as_slice() {
        [] if given.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') => {
            Err(PrefixError::NoMatch { given })
        }
        [] => Ok(given),
        [one] => Ok((*one).to_owned()),
        many => {
            let listed = &many[..many.len().min(LISTED_MATCHES)];
            let short = short_ids(listed, many).into_iter().zip(listed);
            let mut shown: Vec<String> = short
                .map(|(short, full)| match short.len() < full.len() {
                    true => format!("{short}\u{2026}"),
                    false => short.to_owned(),
                })
                .collect();
            if many.len() > LISTED_MATCHES {
                shown.push(format!("and {} more", many.len() - LISTED_MATCHES));
            }
            let matches = shown.join(", ");
            Err(PrefixError::Ambiguous { given, matches })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a1b2c3d4-0000-4000-8000-000000000001";
    const B: &str = "a1b2ffee-0000-4000-8000-000000000002";
    const C: &str = "c0ffee00-0000-4000-8000-000000000003";

    #[test]
    fn a_unique_prefix_names_its_session() {
        let known = [A, B, C];
        assert_eq!(resolve("c", &known).unwrap(), C);
        assert_eq!(resolve("a1b2c", &known).unwrap(), A);
        assert_eq!(resolve("a1b2ffee", &known).unwrap(), B);
    }

    #[test]
    fn a_known_or_full_id_is_passed_through_unchanged() {
        assert_eq!(resolve(A, &[A, B]).unwrap(), A);
        // Unknown to the daemon, but a full id: the /wake contract for full ids stands.
        let unknown = "deadbeef-0000-4000-8000-00000000000f";
        assert_eq!(resolve(unknown, &[A]).unwrap(), unknown);
        // A known id that is also a prefix of another is itself.
        assert_eq!(
            resolve("target-1", &["target-1", "target-10"]).unwrap(),
            "target-1"
        );
    }

    #[test]
    fn no_match_says_where_to_look() {
        let err = resolve("ee", &[A, B]).unwrap_err();
        assert_eq!(err, PrefixError::NoMatch { given: "ee".into() });
        assert_eq!(
            err.to_string(),
            "no session starts with \"ee\"; `wakebridge status --all` lists them"
        );
        assert!(matches!(
            resolve("", &[A]),
            Err(PrefixError::NoMatch { .. })
        ));
        assert!(matches!(
            resolve("a1", &[]),
            Err(PrefixError::NoMatch { .. })
        ));
    }

    #[test]
    fn ambiguity_lists_the_matches_told_apart() {
        let err = resolve("a1b2", &[C, B, A]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"a1b2\" matches a1b2c3d4\u{2026}, a1b2ffee\u{2026}; type more characters"
        );
        let many: Vec<String> = (0..8)
            .map(|i| format!("5a3e000{i}-0000-4000-8000-000000000000"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let err = resolve("5a3e", &many).unwrap_err().to_string();
        assert!(err.contains("5a3e0000\u{2026}, 5a3e0001\u{2026}"), "{err}");
        assert!(err.contains("and 3 more"), "{err}");
    }

    #[test]
    fn a_bus_name_that_is_no_uuid_prefix_goes_as_typed() {
        // Never completed to another session: the daemon answers for the name itself.
        let known = ["rawtest-10", A];
        assert_eq!(resolve("rawtest-1", &known).unwrap(), "rawtest-1");
        assert_eq!(resolve("deploy-bot", &known).unwrap(), "deploy-bot");
        // Known non-UUID names are still themselves.
        assert_eq!(resolve("rawtest-10", &known).unwrap(), "rawtest-10");
    }

    #[test]
    fn full_ids_are_uuids_only() {
        assert!(is_full_id(A));
        assert!(is_full_id("067FD316-8CC7-5CB1-861F-4D9D67BA7EE8"));
        assert!(!is_full_id("a1b2c3d4"));
        assert!(!is_full_id("target-1"));
        assert!(!is_full_id("a1b2c3d4-0000-4000-8000-00000000000g"));
    }
}
