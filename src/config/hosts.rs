//! Host names as the Host guard compares them (canonical forms), and the allowlist.

use std::collections::BTreeSet;
use std::net::IpAddr;

/// Canonical form of a `Host` value: bracketed IPv6 → the inside, else what is before the last
/// `:`; lowercased, an IP literal compressed. A missing header is `""`, which never matches.
pub fn canonical_host(raw: &str) -> String {
    let host = match raw.strip_prefix('[') {
        // An unclosed bracket names nothing; an empty result never matches.
        Some(rest) => rest.split_once(']').map_or("", |(inside, _)| inside),
        None => raw.rsplit_once(':').map_or(raw, |(host, _)| host),
    };
    let host = host.to_ascii_lowercase();
    host.parse::<IpAddr>().map_or(host, |ip| ip.to_string())
}

/// An allowlist entry as an operator writes it: a bare IP literal (IPv6 too) keeps its address;
/// anything else loses its port like a Host header. `None` for a blank entry.
pub fn canonical_entry(entry: &str) -> Option<String> {
    let trimmed = Some(entry.trim()).filter(|t| !t.is_empty())?;
    let ip = trimmed.parse::<IpAddr>();
    Some(ip.map_or_else(|_| canonical_host(trimmed), |ip| ip.to_string()))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAllowlist {
    hosts: BTreeSet<String>,
}

impl HostAllowlist {
    /// From already-canonical names.
    pub fn new(hosts: impl IntoIterator<Item = String>) -> Self {
        Self {
            hosts: hosts.into_iter().filter(|h| !h.is_empty()).collect(),
        }
    }

    /// Whether a raw `Host` header value (absent = `""`) is allowed.
    pub fn allows(&self, raw_host: &str) -> bool {
        let host = canonical_host(raw_host);
        !host.is_empty() && self.hosts.contains(&host)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn canonicalises_ports_brackets_case_and_ipv6() {
        assert_eq!(canonical_host("127.0.0.1:8082"), "127.0.0.1");
        assert_eq!(canonical_host("LocalHost:8082"), "localhost");
        assert_eq!(canonical_host("[::1]:8082"), "::1");
        assert_eq!(canonical_host("[::1]"), "::1");
        assert_eq!(
            canonical_host("[FD7A:115C:A1E0:0:0:0:0:1]:8082"),
            "fd7a:115c:a1e0::1"
        );
        assert_eq!(canonical_host("evil.example"), "evil.example");
        assert_eq!(canonical_host(""), "");
        assert_eq!(canonical_host("[::1"), "");
    }

    #[test]
    fn unbracketed_ipv6_and_trailing_dot_do_not_match_loopback() {
        let list = HostAllowlist::new(["127.0.0.1", "localhost", "::1"].map(String::from));
        assert!(!list.allows("::1"));
        assert!(!list.allows("localhost."));
        assert!(!list.allows(""));
        assert!(list.allows("[::1]:8082"));
        assert!(list.allows("localhost"));
    }

    #[test]
    fn entries_keep_bare_ipv6_and_drop_blank() {
        assert_eq!(
            canonical_entry(" proxy.example "),
            Some("proxy.example".into())
        );
        assert_eq!(canonical_entry("10.0.0.5:8082"), Some("10.0.0.5".into()));
        assert_eq!(canonical_entry("fd7a::1"), Some("fd7a::1".into()));
        assert_eq!(canonical_entry("  "), None);
        assert_eq!(canonical_entry(":8082"), Some(String::new()));
        assert_eq!(canonical_entry("[]"), Some(String::new()));
        assert_eq!(canonical_entry("[]:8082"), Some(String::new()));
    }

    proptest! {
        #[test]
        fn canonical_host_is_idempotent_on_names(name in "[a-zA-Z0-9.-]{1,40}", port in 1u16..) {
            let once = canonical_host(&format!("{name}:{port}"));
            prop_assert_eq!(canonical_host(&once), once.clone());
            prop_assert_eq!(once, name.to_ascii_lowercase());
        }

        #[test]
        fn every_ipv6_spelling_canonicalises_alike(segs in proptest::array::uniform8(0u16..)) {
            let ip = std::net::Ipv6Addr::from(segs);
            let expanded = segs.iter().map(|s| format!("{s:X}")).collect::<Vec<_>>().join(":");
            prop_assert_eq!(canonical_host(&format!("[{expanded}]:80")), ip.to_string());
            prop_assert_eq!(canonical_host(&format!("[{ip}]")), ip.to_string());
        }

        #[test]
        fn never_panics_and_empty_never_allowed(raw in any::<String>()) {
            let list = HostAllowlist::new(["localhost".to_string()]);
            let _ = canonical_host(&raw);
            let _ = canonical_entry(&raw);
            prop_assert!(!list.allows("") );
            let _ = list.allows(&raw);
        }
    }
}
