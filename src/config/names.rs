//! Which setting names exist (read from `config/default.toml`), and a "did you mean" for the ones
//! that do not: a misspelt key would otherwise silently leave its setting at the default.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use super::{ConfigError, ENV_PREFIX};

/// Tables whose keys the user chooses.
const OPEN_TABLES: [&str; 2] = ["wake.messages", "context.models"];

/// Every setting in `config/default.toml`, as `section.key` paths, plus the tables above.
static KNOWN: LazyLock<Known> = LazyLock::new(|| {
    let mut known = Known::default();
    known.collect("", super::layers::defaults());
    known.tables.extend(OPEN_TABLES.map(String::from));
    known
});

#[derive(Default)]
struct Known {
    settings: BTreeSet<String>,
    tables: BTreeSet<String>,
}

impl Known {
    fn collect(&mut self, prefix: &str, table: &toml::Table) {
        for (key, value) in table {
            let path = join(prefix, key);
            match value {
                toml::Value::Table(inner) if !OPEN_TABLES.contains(&path.as_str()) => {
                    self.tables.insert(path.clone());
                    self.collect(&path, inner);
                }
                _ => {
                    self.settings.insert(path);
                }
            }
        }
    }

    fn is_setting(&self, path: &str) -> bool {
        self.settings.contains(path)
            || OPEN_TABLES.iter().any(|open| {
                path.strip_prefix(open)
                    .is_some_and(|rest| rest.starts_with('.'))
            })
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Refuses a key of the user's file that names no setting, with the nearest valid name.
pub fn check_file(
    file: &std::path::Path,
    prefix: &str,
    table: &toml::Table,
) -> Result<(), ConfigError> {
    let known = &*KNOWN;
    for (key, value) in table {
        let path = join(prefix, key);
        if known.is_setting(&path) {
            continue;
        }
        match value {
            toml::Value::Table(inner) if known.tables.contains(&path) => {
                check_file(file, &path, inner)?;
            }
            // A section given a plain value: the settings' own parser names the problem.
            _ if known.tables.contains(&path) => {}
            toml::Value::Table(_) => {
                return Err(ConfigError::UnknownSection {
                    file: file.to_path_buf(),
                    nearest: nearest(&path, known.tables.iter().map(String::as_str))
                        .map(str::to_string),
                    section: path,
                });
            }
            _ => {
                return Err(ConfigError::UnknownSetting {
                    file: file.to_path_buf(),
                    nearest: nearest(&path, known.settings.iter().map(String::as_str))
                        .map(str::to_string),
                    setting: path,
                });
            }
        }
    }
    Ok(())
}

/// The setting a `WAKEBRIDGE_<SECTION>__<KEY>` variable names (`section.key`), lowercased.
fn setting_of(var: &str) -> Option<String> {
    let rest = var.strip_prefix(ENV_PREFIX)?.strip_prefix('_')?;
    Some(rest.replace("__", ".").to_ascii_lowercase())
}

pub(super) fn variable_of(path: &str) -> String {
    let upper = path.replace('.', "__").to_ascii_uppercase();
    format!("{ENV_PREFIX}_{upper}")
}

/// Refuses a `WAKEBRIDGE_*` variable that names no setting, with the nearest valid one.
pub fn check_env<'a>(vars: impl IntoIterator<Item = &'a str>) -> Result<(), ConfigError> {
    // KNOWN is built on the first of wakebridge's variables: most starts (every hook) have none.
    let unknown = vars
        .into_iter()
        .filter_map(|var| Some((var, setting_of(var)?)))
        .find(|(_, path)| !KNOWN.is_setting(path));
    let Some((var, path)) = unknown else {
        return Ok(());
    };
    Err(ConfigError::UnknownVariable {
        var: var.to_string(),
        nearest: nearest(&path, KNOWN.settings.iter().map(String::as_str)).map(variable_of),
    })
}

/// The candidate close enough to `name` to be what was meant: a small edit distance, or the
/// same key in another section.
fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let leaf = |path: &str| path.rsplit('.').next().unwrap_or(path).to_string();
    let wanted_leaf = leaf(name);
    let distance = |candidate: &str| match leaf(candidate) == wanted_leaf {
        // The right key in the wrong section: as close as one slip.
        true => 1,
        false => strsim::levenshtein(name, candidate),
    };
    // The first of the closest.
    let best = candidates.map(|c| (distance(c), c)).min_by_key(|&(d, _)| d);
    let allowed = (name.len() / 4).max(2);
    best.filter(|&(d, _)| d <= allowed).map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn check(text: &str) -> Result<(), String> {
        let table: toml::Table = toml::from_str(text).expect("toml");
        check_file(Path::new("/cfg.toml"), "", &table).map_err(|e| e.to_string())
    }

    #[test]
    fn every_default_setting_is_known_and_the_default_file_passes() {
        let table: toml::Table = toml::from_str(super::super::DEFAULT_TOML).expect("default toml");
        check_file(Path::new("default.toml"), "", &table).expect("the defaults name only settings");
        assert!(KNOWN.settings.contains("nudger.idle_after"));
        assert!(
            KNOWN
                .settings
                .contains("context.thresholds.wrap_up.percent")
        );
    }

    #[test]
    fn a_misspelt_key_or_section_is_refused_with_the_nearest_name() {
        let e = check("[nudger]\nidle_aftr = \"1m\"\n").expect_err("refused");
        assert!(
            e.contains("`nudger.idle_aftr`") && e.contains("did you mean `nudger.idle_after`?"),
            "{e}"
        );
        let e = check("[nudgr]\nidle_after = \"1m\"\n").expect_err("refused");
        assert!(
            e.contains("[nudgr]") && e.contains("did you mean [nudger]?"),
            "{e}"
        );
        let e = check("[bridge]\nidle_after = \"1m\"\n").expect_err("refused");
        assert!(e.contains("did you mean `nudger.idle_after`?"), "{e}");
        let e = check("[bridge]\nzzzzzz = 1\n").expect_err("refused");
        assert!(!e.contains("did you mean"), "nothing is close: {e}");
    }

    #[test]
    fn open_tables_take_any_key() {
        check("[wake.messages]\nmine = \"Carry on.\"\n[context.models]\n\"my-model\" = 5\n")
            .expect("user-chosen keys");
    }

    #[test]
    fn variables_must_name_a_setting() {
        check_env([
            "WAKEBRIDGE_BRIDGE__PORT",
            "WAKEBRIDGE_NUDGER__IDLE_AFTER",
            "HOME",
        ])
        .expect("known");
        check_env(["WAKEBRIDGE_WAKE__MESSAGES__MINE"]).expect("open table");
        let e = check_env(["WAKEBRIDGE_NUDGER__IDLE_AFTR"])
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("did you mean WAKEBRIDGE_NUDGER__IDLE_AFTER?"),
            "{e}"
        );
        let e = check_env(["WAKEBRIDGE_PORT"])
            .expect_err("refused")
            .to_string();
        assert!(e.contains("did you mean WAKEBRIDGE_BRIDGE__PORT?"), "{e}");
    }
}
