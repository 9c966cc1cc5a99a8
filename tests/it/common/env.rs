//! The private environment every daemon a test starts sees, in process (`config::resolve`,
//! `App::build`) or as the real binary: nothing of the user's HOME, config, state, runtime dir
//! or wake dir.

use std::collections::BTreeMap;
use std::path::Path;

/// A private environment under `root`: its own HOME, XDG config, state and runtime dirs
/// (singleton locks) and wake dir; the spool backend, registration off. `extra` is applied last,
/// so it overrides any of these.
pub fn test_env(root: &Path, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let at = |dir: &str| root.join(dir).display().to_string();
    env.insert("HOME".into(), at("home"));
    env.insert("XDG_CONFIG_HOME".into(), at("config"));
    env.insert("XDG_STATE_HOME".into(), at("state"));
    env.insert("XDG_RUNTIME_DIR".into(), at("run"));
    env.insert("AGENT_EVENT_BUS_WAKE_DIR".into(), at("wake"));
    env.insert("AGENT_EVENT_BUS_BRIDGE_BACKEND".into(), "spool".into());
    // Tests that want a bus start a stub bus and turn this back on.
    env.insert("WAKEBRIDGE_REGISTRATION__ENABLED".into(), "false".into());
    for (k, v) in extra {
        env.insert((*k).into(), (*v).into());
    }
    env
}
