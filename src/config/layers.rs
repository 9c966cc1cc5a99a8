//! The layering of wakebridge's own settings into one TOML table: defaults < the user's file <
//! `WAKEBRIDGE_<SECTION>__<KEY>` variables, each variable's text read as the type its default has.

use std::sync::LazyLock;

use super::{ConfigError, DEFAULT_TOML, ENV_PREFIX};

/// Parsed without the file's comment lines, two thirds of it: every verb (every hook) parses the
/// defaults at start, and the parser checks comments character by character.
static DEFAULTS: LazyLock<toml::Table> = LazyLock::new(|| {
    let bare: String = (DEFAULT_TOML.lines())
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| [line, "\n"])
        .collect();
    toml::from_str(&bare).unwrap_or_default()
});

pub fn defaults() -> &'static toml::Table {
    &DEFAULTS
}

/// Lays `over` on `base`: tables merge key by key, anything else replaces.
pub fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base)), toml::Value::Table(over)) => merge(base, over),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Sets every `WAKEBRIDGE_<SECTION>__<KEY>` of `vars` in `table` (names were checked before);
/// other variables are passed over.
pub fn apply_env<'a>(
    table: &mut toml::Table,
    vars: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), ConfigError> {
    for (name, text) in vars {
        let Some(path) = name
            .strip_prefix(ENV_PREFIX)
            .and_then(|rest| rest.strip_prefix('_'))
        else {
            continue;
        };
        let path: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
        let value = typed(name, text, like(&path))?;
        set(table, &path, value);
    }
    Ok(())
}

/// The default of `path` (for a user-filled table, one of its entries): the type to read as.
fn like(path: &[String]) -> Option<&'static toml::Value> {
    let (last, parents) = path.split_last()?;
    let table = (parents.iter()).try_fold(defaults(), |table, key| table.get(key)?.as_table())?;
    table.get(last).or_else(|| table.values().next())
}

/// `text` as the type of `like`. A number that does not parse stays text: some settings take
/// text (the port, durations), the rest refuse it by name later.
fn typed(name: &str, text: &str, like: Option<&toml::Value>) -> Result<toml::Value, ConfigError> {
    let trimmed = text.trim();
    let as_text = toml::Value::String(text.to_string());
    Ok(match like {
        Some(toml::Value::Integer(_)) => trimmed.parse().map_or(as_text, toml::Value::Integer),
        Some(toml::Value::Float(_)) => trimmed.parse().map_or(as_text, toml::Value::Float),
        Some(toml::Value::Boolean(_)) => toml::Value::Boolean(match trimmed {
            "true" | "1" => true,
            "false" | "0" => false,
            _ => return Err(super::bad_value(name, text, "is not true or false".into())),
        }),
        Some(toml::Value::Array(_)) => toml::Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| toml::Value::String(item.to_string()))
                .collect(),
        ),
        _ => as_text,
    })
}

/// Lays `value` at `path`: an entry in the way that is not a table is replaced by one.
fn set(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let nested = path.iter().rev().fold(value, |inner, key| {
        toml::Value::Table(toml::Table::from_iter([(key.clone(), inner)]))
    });
    if let toml::Value::Table(over) = nested {
        merge(table, over);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_without_comment_lines_are_the_whole_file() {
        let whole: toml::Table = toml::from_str(DEFAULT_TOML).expect("config/default.toml");
        assert!(whole.contains_key("bridge"));
        assert_eq!(defaults(), &whole);
    }

    #[test]
    fn a_file_overrides_key_by_key_and_variables_come_last() {
        let mut table = defaults().clone();
        let file: toml::Table = toml::from_str("[nudger]\nidle_after = \"1m\"\n").expect("toml");
        merge(&mut table, file);
        apply_env(
            &mut table,
            [
                ("WAKEBRIDGE_NUDGER__ACKNOWLEDGE_AFTER", "7"),
                ("WAKEBRIDGE_MUX__SHELLS", "bash, zsh,"),
                ("WAKEBRIDGE_CONTEXT__ENABLED", "false"),
                ("WAKEBRIDGE_CONTEXT__MODELS__MY_MODEL", "5000"),
                ("WAKEBRIDGE_WAKE__MESSAGES__MINE", "Carry on."),
            ],
        )
        .expect("valid");
        let nudger = table["nudger"].as_table().expect("section");
        assert_eq!(nudger["idle_after"].as_str(), Some("1m"));
        assert_eq!(nudger["acknowledge_after"].as_integer(), Some(7));
        assert_eq!(
            nudger["base_cooldown"].as_str(),
            Some("90s"),
            "untouched keys stay"
        );
        let shells: Vec<_> = table["mux"]["shells"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(toml::Value::as_str)
            .collect();
        assert_eq!(shells, ["bash", "zsh"]);
        assert_eq!(table["context"]["enabled"].as_bool(), Some(false));
        assert_eq!(
            table["context"]["models"]["my_model"].as_integer(),
            Some(5000)
        );
        assert_eq!(
            table["wake"]["messages"]["mine"].as_str(),
            Some("Carry on.")
        );
    }

    #[test]
    fn a_boolean_variable_that_is_not_one_is_refused_by_name() {
        let mut table = defaults().clone();
        let e =
            apply_env(&mut table, [("WAKEBRIDGE_CONTEXT__ENABLED", "maybe")]).expect_err("refused");
        assert!(
            e.to_string().contains("WAKEBRIDGE_CONTEXT__ENABLED")
                && e.to_string().contains("true or false"),
            "{e}"
        );
    }
}
