//! The service files `wakebridge service install` writes, rendered from the templates in
//! `deploy/` (compiled in, so the reference files users read are the ones installed): the
//! daemon's environment, the PATH it finds tmux and zellij on, and each format's quoting. Pure.

use std::path::{Path, PathBuf};

use crate::config::SECRET_ENV;

const SYSTEMD_TEMPLATE: &str = include_str!("../../../deploy/wakebridge.service");
const LAUNCHD_TEMPLATE: &str = include_str!("../../../deploy/wakebridge.plist");

/// The launchd label; deliberately not a prefix of the bus's own label.
pub const LAUNCHD_LABEL: &str = "dev.wakebridge";
pub const SYSTEMD_UNIT: &str = "wakebridge.service";
/// The variable the daemon reads `[bridge] secret_file` from; set in the unit, never the secret.
const SECRET_FILE_ENV: &str = "WAKEBRIDGE_BRIDGE__SECRET_FILE";

/// Directories searched after the ones tmux and zellij were found in: where `cargo install`
/// puts binaries, Homebrew on Apple silicon, Linuxbrew (system-wide, per-user), the system's.
const FALLBACK_PATH: [&str; 7] = [
    "~/.cargo/bin",
    "/opt/homebrew/bin",
    "/home/linuxbrew/.linuxbrew/bin",
    "~/.linuxbrew/bin",
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
];

/// Variables passed on where the installer has them: the home, Claude Code's config dir, the
/// XDG dirs that place the config file and the ledger (the hooks must find the same ledger),
/// tmux's socket dir, and the Python bridge's two non-`BRIDGE` variables.
const KEPT_VARS: [&str; 7] = [
    "HOME",
    "CLAUDE_CONFIG_DIR",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "TMUX_TMPDIR",
    "AGENT_EVENT_BUS_URL",
    "AGENT_EVENT_BUS_WAKE_DIR",
];

/// Prefixes of the settings' variables: the Python bridge's and wakebridge's own.
const KEPT_PREFIXES: [&str; 2] = ["AGENT_EVENT_BUS_BRIDGE_", "WAKEBRIDGE_"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, strum::IntoStaticStr)]
pub enum Platform {
    /// A launchd LaunchAgent (macOS).
    #[strum(serialize = "launchd agent")]
    Launchd,
    /// A systemd user unit (Linux).
    #[strum(serialize = "systemd user unit")]
    Systemd,
}

impl Platform {
    pub fn native() -> Platform {
        match cfg!(target_os = "macos") {
            true => Platform::Launchd,
            false => Platform::Systemd,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub exe: PathBuf,
    /// `--config <path>` (absolute) when the installer was given one.
    pub config: Option<PathBuf>,
    /// For launchd's log paths.
    pub home: PathBuf,
    /// The daemon's PATH, joined.
    pub path: String,
    /// The daemon's other variables, sorted by name.
    pub env: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A value with a control character (a newline would end the line it is on).
    #[error(
        "{what} {value:?} contains a control character, which a service file cannot hold: \
         unset or change it before installing"
    )]
    Unprintable { what: String, value: String },
    /// The compiled-in template lacks a line this code replaces: a build of mismatched files.
    #[error(
        "the built-in template deploy/{file} has no `{line}` to fill in: this wakebridge was \
         built from mismatched sources; rebuild it"
    )]
    Template {
        file: &'static str,
        line: &'static str,
    },
}

/// The daemon's PATH: the directories `found` (where the installer's PATH has tmux, zellij and
/// claude) first, then [`FALLBACK_PATH`] with `~` as `home`; absolute directories only, each
/// once, none with a `:` (it would split the list).
pub fn daemon_path(found: &[PathBuf], home: &Path) -> String {
    let fallbacks = FALLBACK_PATH.iter().map(|dir| {
        dir.strip_prefix("~/")
            .map_or_else(|| PathBuf::from(dir), |rest| home.join(rest))
    });
    let mut dirs: Vec<&str> = Vec::new();
    let all: Vec<PathBuf> = found.iter().cloned().chain(fallbacks).collect();
    let absolute = all.iter().filter(|dir| dir.is_absolute());
    for text in absolute.filter_map(|dir| Some(dir.to_str()?.trim_end_matches('/'))) {
        if !text.contains(':') && !dirs.contains(&text) {
            dirs.push(text);
        }
    }
    dirs.join(":")
}

/// The variables of the installer's environment `vars` the daemon needs ([`KEPT_VARS`], the
/// settings' prefixes), without the secret, PATH ([`daemon_path`]) or an empty value (unset to
/// the daemon); with `secret_file` as [`SECRET_FILE_ENV`] when there is one. Sorted by name.
pub fn daemon_env(vars: &[(String, String)], secret_file: Option<&Path>) -> Vec<(String, String)> {
    let kept = |name: &str| {
        name != SECRET_ENV
            && name != SECRET_FILE_ENV
            && (KEPT_VARS.contains(&name) || KEPT_PREFIXES.iter().any(|p| name.starts_with(p)))
    };
    let mut env: Vec<(String, String)> = (vars.iter())
        .filter(|(name, value)| !value.trim().is_empty() && kept(name))
        .cloned()
        .collect();
    if let Some(file) = secret_file {
        env.push((SECRET_FILE_ENV.to_string(), file.display().to_string()));
    }
    env.sort();
    env.dedup_by(|a, b| a.0 == b.0);
    env
}

/// The file for `platform`, its first line saying what wrote it.
pub fn render(platform: Platform, spec: &Spec) -> Result<String, RenderError> {
    let mut args = vec!["serve".to_string()];
    if let Some(config) = &spec.config {
        args.extend(["--config".to_string(), config.display().to_string()]);
    }
    let exe = spec.exe.display().to_string();
    match platform {
        Platform::Systemd => systemd(spec, &exe, &args),
        Platform::Launchd => launchd(spec, &exe, &args),
    }
}

fn written_by() -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!("Written by `wakebridge service install` ({version}); a later install replaces it.")
}

/// Where `line` starts in `file`'s `template`.
fn find(template: &str, file: &'static str, line: &'static str) -> Result<usize, RenderError> {
    template
        .find(line)
        .ok_or(RenderError::Template { file, line })
}

/// `template` with `line`, found exactly once, replaced by `with`.
fn fill(
    template: &str,
    file: &'static str,
    line: &'static str,
    with: &str,
) -> Result<String, RenderError> {
    if template.matches(line).count() != 1 {
        return Err(RenderError::Template { file, line });
    }
    Ok(template.replacen(line, with, 1))
}

fn printable<'a>(what: &str, value: &'a str) -> Result<&'a str, RenderError> {
    if !value.chars().any(char::is_control) {
        return Ok(value);
    }
    let (what, value) = (what.to_string(), value.to_string());
    Err(RenderError::Unprintable { what, value })
}

/// One systemd word in double quotes: `\` and `"` escaped, `%` doubled (specifiers), and in a
/// command line `$` doubled (variable expansion). Not a shell: systemd's own syntax.
fn systemd_quoted(what: &str, value: &str, in_command: bool) -> Result<String, RenderError> {
    let mut out = String::from('"');
    for c in printable(what, value)?.chars() {
        match c {
            '\\' | '"' => out.extend(['\\', c]),
            '%' => out.push_str("%%"),
            '$' if in_command => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

const SYSTEMD_FIRST_SECTION: &str = "[Unit]\n";
const SYSTEMD_EXEC: &str = "ExecStart=%h/.cargo/bin/wakebridge serve\n";
const SYSTEMD_PATH: &str = "Environment=PATH=%h/.cargo/bin:/opt/homebrew/bin:/home/linuxbrew/.linuxbrew/bin:%h/.linuxbrew/bin:/usr/local/bin:/usr/bin:/bin\n";

fn systemd(spec: &Spec, exe: &str, args: &[String]) -> Result<String, RenderError> {
    let mut exec = vec![systemd_quoted("the binary's path", exe, true)?];
    for arg in args {
        exec.push(systemd_quoted("--config", arg, true)?);
    }
    let exec = format!("ExecStart={}\n", exec.join(" "));
    let path = ("PATH".to_string(), spec.path.clone());
    let mut env = String::new();
    for (name, value) in std::iter::once(&path).chain(&spec.env) {
        let quoted = systemd_quoted(name, &format!("{name}={value}"), false)?;
        env.push_str(&format!("Environment={quoted}\n"));
    }
    // The header explains the manual install; the rendered file says what wrote it instead.
    let at = find(SYSTEMD_TEMPLATE, SYSTEMD_UNIT, SYSTEMD_FIRST_SECTION)?;
    let text = fill(&SYSTEMD_TEMPLATE[at..], SYSTEMD_UNIT, SYSTEMD_EXEC, &exec)?;
    let text = fill(&text, SYSTEMD_UNIT, SYSTEMD_PATH, &env)?;
    Ok(format!("# {}\n\n{text}", written_by()))
}

fn xml(what: &str, value: &str) -> Result<String, RenderError> {
    Ok(printable(what, value)?
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;"))
}

const LAUNCHD_FILE: &str = "wakebridge.plist";
const LAUNCHD_HEADER_END: &str = "for one never match the other.\n-->\n";
const LAUNCHD_PROGRAM: &str =
    "\t\t<string>__HOME__/.cargo/bin/wakebridge</string>\n\t\t<string>serve</string>\n";
const LAUNCHD_ENV: &str = "\t\t<key>PATH</key>\n\t\t<string>__HOME__/.cargo/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin</string>\n\t\t<key>HOME</key>\n\t\t<string>__HOME__</string>\n";

fn launchd(spec: &Spec, exe: &str, args: &[String]) -> Result<String, RenderError> {
    let mut program = format!("\t\t<string>{}</string>\n", xml("the binary's path", exe)?);
    for arg in args {
        program.push_str(&format!("\t\t<string>{}</string>\n", xml("--config", arg)?));
    }
    let path = ("PATH".to_string(), spec.path.clone());
    let mut env = String::new();
    for (name, value) in std::iter::once(&path).chain(&spec.env) {
        let (name, value) = (xml("a variable name", name)?, xml(name, value)?);
        env.push_str(&format!(
            "\t\t<key>{name}</key>\n\t\t<string>{value}</string>\n"
        ));
    }
    // The header explains the manual install (sed over __HOME__); the rendered file says what
    // wrote it instead.
    let start = find(LAUNCHD_TEMPLATE, LAUNCHD_FILE, "<!--")?;
    let end = find(LAUNCHD_TEMPLATE, LAUNCHD_FILE, LAUNCHD_HEADER_END)?;
    let (before, after) = (
        &LAUNCHD_TEMPLATE[..start],
        &LAUNCHD_TEMPLATE[end + LAUNCHD_HEADER_END.len()..],
    );
    let text = format!("{before}<!-- {} -->\n{after}", written_by());
    let text = fill(&text, LAUNCHD_FILE, LAUNCHD_PROGRAM, &program)?;
    let text = fill(&text, LAUNCHD_FILE, LAUNCHD_ENV, &env)?;
    // What is left are the log paths.
    Ok(text.replace("__HOME__", &xml("HOME", &spec.home.display().to_string())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn spec() -> Spec {
        Spec {
            exe: PathBuf::from("/opt/wake bridge/bin/wakebridge"),
            config: Some(PathBuf::from("/home/u/my 100% config.toml")),
            home: PathBuf::from("/home/u"),
            path: "/usr/bin:/bin".into(),
            env: vec![
                ("HOME".into(), "/home/u".into()),
                (
                    "WAKEBRIDGE_NUDGER__MESSAGES".into(),
                    "say \"hi\", $USER".into(),
                ),
            ],
        }
    }

    #[test]
    fn path_puts_the_multiplexers_first_then_the_fallbacks_once_each() {
        let found = [
            PathBuf::from("/home/u/.nix-profile/bin"),
            PathBuf::from("/usr/bin/"),
            PathBuf::from("relative/bin"),
            PathBuf::from("/odd:dir"),
        ];
        assert_eq!(
            daemon_path(&found, Path::new("/home/u")),
            "/home/u/.nix-profile/bin:/usr/bin:/home/u/.cargo/bin:/opt/homebrew/bin:\
             /home/linuxbrew/.linuxbrew/bin:/home/u/.linuxbrew/bin:/usr/local/bin:/bin"
        );
    }

    #[test]
    fn env_keeps_the_settings_and_homes_but_never_the_secret() {
        let env = daemon_env(
            &vars(&[
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
                ("CLAUDE_CONFIG_DIR", "/home/u/.claude-work"),
                ("AGENT_EVENT_BUS_URL", "http://127.0.0.1:9/mcp"),
                ("AGENT_EVENT_BUS_BRIDGE_PORT", "9000"),
                ("AGENT_EVENT_BUS_BRIDGE_SECRET", "s3cret"),
                ("AGENT_EVENT_BUS_BRIDGE_BIND", ""),
                ("AGENT_EVENT_BUS_SESSION_ID", "a-session"),
                ("WAKEBRIDGE_BRIDGE__SECRET_FILE", "/elsewhere"),
                ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "10m"),
                ("TMUX", "/tmp/tmux-1000/default,1,0"),
                ("SHELL", "/bin/zsh"),
            ]),
            Some(Path::new("/home/u/.config/wakebridge/secret")),
        );
        assert_eq!(
            env,
            vars(&[
                ("AGENT_EVENT_BUS_BRIDGE_PORT", "9000"),
                ("AGENT_EVENT_BUS_URL", "http://127.0.0.1:9/mcp"),
                ("CLAUDE_CONFIG_DIR", "/home/u/.claude-work"),
                ("HOME", "/home/u"),
                (
                    "WAKEBRIDGE_BRIDGE__SECRET_FILE",
                    "/home/u/.config/wakebridge/secret"
                ),
                ("WAKEBRIDGE_NUDGER__IDLE_AFTER", "10m"),
            ])
        );
        assert!(daemon_env(&vars(&[("AGENT_EVENT_BUS_BRIDGE_SECRET", "x")]), None).is_empty());
    }

    #[test]
    fn systemd_quotes_paths_specifiers_and_variables() {
        let unit = render(Platform::Systemd, &spec()).unwrap();
        assert!(
            unit.starts_with("# Written by `wakebridge service install`"),
            "{unit}"
        );
        assert!(
            unit.contains(
                "ExecStart=\"/opt/wake bridge/bin/wakebridge\" \"serve\" \"--config\" \
                 \"/home/u/my 100%% config.toml\"\n"
            ),
            "{unit}"
        );
        assert!(
            unit.contains("Environment=\"PATH=/usr/bin:/bin\"\n"),
            "{unit}"
        );
        assert!(unit.contains("Environment=\"HOME=/home/u\"\n"), "{unit}");
        // `$` is literal in Environment= (no expansion there), `"` is escaped.
        assert!(
            unit.contains("Environment=\"WAKEBRIDGE_NUDGER__MESSAGES=say \\\"hi\\\", $USER\"\n"),
            "{unit}"
        );
        assert!(!unit.contains("%h"), "{unit}");
        assert!(unit.contains("RestartPreventExitStatus=2\n"));
        let mut no_config = spec();
        no_config.config = None;
        let unit = render(Platform::Systemd, &no_config).unwrap();
        assert!(unit.contains("ExecStart=\"/opt/wake bridge/bin/wakebridge\" \"serve\"\n"));
    }

    #[test]
    fn launchd_fills_every_placeholder_and_escapes_xml() {
        let mut s = spec();
        s.env.push(("WAKEBRIDGE_X".into(), "a<b & 'c'".into()));
        let plist = render(Platform::Launchd, &s).unwrap();
        assert!(!plist.contains("__HOME__"), "{plist}");
        assert!(plist.contains("<!-- Written by `wakebridge service install`"));
        assert!(plist.contains(
            "\t\t<string>/opt/wake bridge/bin/wakebridge</string>\n\t\t<string>serve</string>\n\
             \t\t<string>--config</string>\n\t\t<string>/home/u/my 100% config.toml</string>\n"
        ));
        assert!(
            plist.contains("<string>a&lt;b &amp; &apos;c&apos;</string>"),
            "{plist}"
        );
        assert!(plist.contains("<string>/home/u/Library/Logs/wakebridge/wakebridge.err</string>"));
        assert!(plist.contains("<key>SuccessfulExit</key>\n\t\t<false/>"));
    }

    #[test]
    fn a_control_character_is_refused_by_name() {
        let mut s = spec();
        s.env.push(("WAKEBRIDGE_Y".into(), "two\nlines".into()));
        for platform in [Platform::Systemd, Platform::Launchd] {
            let e = render(platform, &s).unwrap_err().to_string();
            assert!(
                e.contains("WAKEBRIDGE_Y") && e.contains("control character"),
                "{e}"
            );
        }
    }
}
