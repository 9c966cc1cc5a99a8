//! The one environment lookup: the process's variables in production, a fixed set in tests, so no
//! test touches the process environment.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// `WAKEBRIDGE=keep` in a session's environment asks for it to be kept working whatever
/// `[nudger] keep` says: its SessionStart hook records it, and `wakebridge launch` sets it for
/// the agents it starts. Not a `WAKEBRIDGE_*` name: those are settings, and one that names none
/// is refused.
pub const KEEP: &str = "WAKEBRIDGE=keep";

#[derive(Debug, Clone)]
pub struct Env {
    /// `None`: the process's own variables.
    fixed: Option<BTreeMap<String, String>>,
}

impl Env {
    pub fn process() -> Env {
        Env { fixed: None }
    }

    pub fn empty() -> Env {
        Env::from(BTreeMap::new())
    }

    /// Exactly these variables and no others.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Env {
        let vars = pairs.into_iter().map(|(k, v)| (k.into(), v.into()));
        Env::from(vars.collect::<BTreeMap<_, _>>())
    }

    /// Only the variables `names` of this environment.
    pub fn only(&self, names: &[&str]) -> Env {
        let kept = names
            .iter()
            .filter_map(|name| Some((*name, self.get(name)?)));
        Env::from_pairs(kept)
    }

    /// Whether the session this runs in asked to be kept working ([`KEEP`]).
    pub fn asks_to_be_kept(&self) -> bool {
        let (name, value) = KEEP.split_once('=').unwrap_or_default();
        self.get(name).is_some_and(|v| v.trim() == value)
    }

    /// The variable's value, if set (and valid Unicode).
    pub fn get(&self, name: &str) -> Option<String> {
        match &self.fixed {
            Some(vars) => vars.get(name).cloned(),
            None => std::env::var(name).ok(),
        }
    }

    /// The value unless blank: the reference's rule that an empty value means "not set".
    pub fn nonempty(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| !v.trim().is_empty())
    }

    /// The variable as a path when absolute (a relative one would mean something else in every
    /// working directory).
    pub fn absolute_path(&self, name: &str) -> Option<PathBuf> {
        self.nonempty(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// Every variable, sorted by name.
    pub fn vars(&self) -> Vec<(String, String)> {
        match &self.fixed {
            Some(vars) => vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            None => {
                let mut vars: Vec<_> = std::env::vars().collect();
                vars.sort();
                vars
            }
        }
    }

    /// A copy with `name` set to `value` (tests and child environments).
    pub fn with(mut self, name: &str, value: &str) -> Env {
        let mut vars: BTreeMap<String, String> = self.vars().into_iter().collect();
        vars.insert(name.to_string(), value.to_string());
        self.fixed = Some(vars);
        self
    }
}

impl From<BTreeMap<String, String>> for Env {
    fn from(vars: BTreeMap<String, String>) -> Env {
        Env { fixed: Some(vars) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_set_is_all_there_is() {
        let env = Env::from_pairs([("HOME", "/home/u"), ("EMPTY", "  "), ("REL", "a/b")]);
        assert_eq!(env.get("HOME").as_deref(), Some("/home/u"));
        assert_eq!(env.get("PATH"), None);
        assert_eq!(env.nonempty("EMPTY"), None);
        assert_eq!(env.absolute_path("HOME"), Some(PathBuf::from("/home/u")));
        assert_eq!(env.absolute_path("REL"), None);
        let more = env.with("X", "1");
        assert_eq!(more.get("X").as_deref(), Some("1"));
        assert_eq!(more.vars().len(), 4);
    }
}
