//! `wakebridge service install|uninstall|status`: the daemon under launchd or systemd. Install
//! renders the file (`render.rs`), writes it and the secret file it only names, loads it
//! (`manager.rs`) and waits until the new instance, known by its pid, answers `/health`. Exit
//! codes: 0 done, 1 the manager failed or the service does not answer, 2 a problem found before
//! anything was loaded.

mod manager;
pub mod render;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::api::Health;
use crate::cli::client::daemon_url;
use crate::config::{self, Config, ConfigError, SECRET_ENV};
use crate::deadline::Deadline;
use crate::env::Env;
use crate::mux::process::MuxError;
use crate::private_fs::{self, FILE_MODE, Written};
use manager::shown;
use render::{LAUNCHD_LABEL, Platform, SYSTEMD_UNIT, Spec};

/// How often install polls the manager and `/health` while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Longest one `/health` request may take; the daemon answers in milliseconds.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long `ps` may take when telling whether `/health`'s pid is the service's child.
const PS_BUDGET: Duration = Duration::from_secs(5);
/// How long install waits for launchd to let go of the old job before `bootstrap`.
const BOOTOUT_WAIT: Duration = Duration::from_secs(15);
/// The programs whose directories come first on the daemon's PATH: the multiplexers, and the
/// agent `launch` and restarts start.
const PATH_PROGRAMS: [&str; 3] = ["tmux", "zellij", "claude"];
/// Where `status` looks for the daemon when the configuration does not resolve.
const DEFAULT_URL: &str = "http://127.0.0.1:8082";

#[derive(Debug, clap::Subcommand)]
pub enum ServiceCommand {
    /// Write the service file (launchd LaunchAgent or systemd user unit), load it, and wait
    /// until the new daemon answers /health.
    Install(InstallArgs),
    /// Stop and unload the service and remove its file (the secret file is kept).
    Uninstall(PlatformArg),
    /// Whether the service is installed, loaded and answering.
    Status(PlatformArg),
}

#[derive(Debug, clap::Args)]
pub struct PlatformArg {
    /// The service manager [default: launchd on macOS, systemd elsewhere]
    #[arg(long, value_enum)]
    platform: Option<Platform>,
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    #[command(flatten)]
    platform: PlatformArg,
    /// Print the file and the commands, and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// How long to wait for the new instance to answer /health (a restart first waits out the
    /// old instance's stop, and launchd may throttle a relaunch by 10 s).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = config::duration::parse)]
    wait: Duration,
}

#[derive(Debug, thiserror::Error)]
enum ServiceError {
    #[error(transparent)]
    Config(ConfigError),
    #[error(
        "HOME is not set to an absolute path, so the service file's place is unknown: set HOME"
    )]
    NoHome,
    #[error("cannot tell where this wakebridge binary is ({0}); run it by its path")]
    NoExe(std::io::Error),
    #[error(transparent)]
    Render(#[from] render::RenderError),
    #[error("{0} (the secret file install would use; fix it or remove it, then install again)")]
    Secret(config::secret::SecretFileError),
    #[error("cannot {what} {}: {source}; check it and its directory's permissions", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}; is the service manager running for this user?")]
    Manager(#[from] MuxError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ServiceError {
    let path = path.to_owned();
    move |source| ServiceError::Io { what, path, source }
}

/// Only `install` needs the configuration to resolve: `uninstall` and `status` must work
/// precisely when it does not. `config_flag` is the global `--config`.
pub fn run(
    command: &ServiceCommand,
    config: Result<Config, ConfigError>,
    config_flag: Option<&Path>,
) -> ExitCode {
    let env = Env::process();
    let platform = |arg: &PlatformArg| arg.platform.unwrap_or_else(Platform::native);
    let result = super::block_on(async {
        match command {
            ServiceCommand::Install(args) => {
                let config = config.map_err(ServiceError::Config)?;
                install(args, platform(&args.platform), &config, config_flag, &env).await
            }
            ServiceCommand::Uninstall(args) => uninstall(platform(args), config_flag, &env).await,
            ServiceCommand::Status(args) => status(platform(args), config.as_ref(), &env).await,
        }
    });
    let result = result.map_err(ServiceError::Runtime).and_then(|done| done);
    result.unwrap_or_else(|e| {
        crate::errln!("wakebridge service: {e}");
        match e {
            ServiceError::Manager(_) | ServiceError::Runtime(_) => ExitCode::FAILURE,
            _ => ExitCode::from(2),
        }
    })
}

struct Locations {
    home: PathBuf,
    /// The unit or plist.
    file: PathBuf,
    /// launchd's logs (systemd logs to the journal).
    log_dir: PathBuf,
    /// The secret file install writes when none is configured.
    default_secret: PathBuf,
}

impl Locations {
    fn of(platform: Platform, env: &Env) -> Result<Locations, ServiceError> {
        let home = env.absolute_path("HOME").ok_or(ServiceError::NoHome)?;
        let config_home = env.absolute_path("XDG_CONFIG_HOME");
        let config_home = config_home.unwrap_or_else(|| home.join(".config"));
        let file = match platform {
            Platform::Systemd => config_home.join("systemd/user").join(SYSTEMD_UNIT),
            Platform::Launchd => home.join(format!("Library/LaunchAgents/{LAUNCHD_LABEL}.plist")),
        };
        Ok(Locations {
            log_dir: home.join("Library/Logs/wakebridge"),
            default_secret: config_home.join("wakebridge/secret"),
            file,
            home,
        })
    }
}

/// 0600, atomically, unless it is there already.
fn write(path: &Path, text: &str) -> Result<Written, ServiceError> {
    private_fs::write(path, text.as_bytes(), FILE_MODE).map_err(io("write", path))
}

async fn install(
    args: &InstallArgs,
    platform: Platform,
    config: &Config,
    config_flag: Option<&Path>,
    env: &Env,
) -> Result<ExitCode, ServiceError> {
    let locations = Locations::of(platform, env)?;
    let exe = crate::cli::own_binary(env).map_err(ServiceError::NoExe)?;
    let canonical = |path: &Path| std::fs::canonicalize(path).map_err(io("find --config", path));
    let config_path = config_flag.map(canonical).transpose()?;
    // The secret file the daemon will read: the configured one, else the default (written from
    // the installer's AGENT_EVENT_BUS_BRIDGE_SECRET when it has one). A configured file was read
    // by resolve() already; one left by an earlier install must not be dropped silently (that
    // would turn signature checks off).
    let configured = Some(config.settings.bridge.secret_file.as_str())
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let secret_file = configured.clone().unwrap_or(locations.default_secret);
    let secret = env.get(SECRET_ENV).filter(|s| !s.is_empty());
    if secret.is_none() && configured.is_none() && secret_file.exists() {
        config::secret::read(&secret_file, config::secret::WEBHOOK_SECRET)
            .map_err(ServiceError::Secret)?;
    }
    let secret_file =
        (secret.is_some() || configured.is_some() || secret_file.exists()).then_some(secret_file);
    let path = env.get("PATH").unwrap_or_default();
    let found: Vec<PathBuf> = PATH_PROGRAMS
        .iter()
        .filter_map(|program| {
            std::env::split_paths(&path)
                .find(|dir| crate::mux::resolves(Path::new(program), dir.as_os_str()))
        })
        .collect();
    let spec = Spec {
        exe,
        config: config_path,
        path: render::daemon_path(&found, &locations.home),
        env: render::daemon_env(&env.vars(), secret_file.as_deref()),
        home: locations.home.clone(),
    };
    let text = render::render(platform, &spec)?;
    let before = platform.state().await;
    // Unknown: systemd's restart starts a stopped unit too and never leaves an old instance
    // answering for the new one; launchd's bootout of a label not loaded would fail.
    let running = match (&before, platform) {
        (Ok(s), Platform::Systemd) => s.state.starts_with("activ"),
        (Ok(s), Platform::Launchd) => s.loaded,
        (Err(_), platform) => platform == Platform::Systemd,
    };
    let commands = platform.load_commands(&locations.file, running);
    let file = locations.file.display();
    let log_dir = (platform == Platform::Launchd).then_some(&locations.log_dir);
    if args.dry_run {
        let what = match Written::of(&locations.file, text.as_bytes()) {
            Written::New => "new",
            Written::Replaced => "replacing the file there",
            Written::Unchanged => "the same as the file there",
        };
        crate::outln!("would write {file} ({what}):\n{}", text.trim_end());
        match (&secret, secret_file.as_deref().map(Path::display)) {
            (Some(_), Some(path)) => crate::outln!(
                "would write the secret ({SECRET_ENV}) to {path} (0600); the file above only names it"
            ),
            (None, Some(path)) => crate::outln!("would keep using the secret file {path}"),
            (_, None) => crate::outln!("no secret ({SECRET_ENV} is not set)"),
        }
        if let Some(dir) = log_dir {
            crate::outln!("would create {}", dir.display());
        }
        if let Err(e) = &before {
            crate::outln!("(cannot ask the service manager, so assuming it is not loaded: {e})");
        }
        crate::outln!("would run:");
        for command in &commands {
            crate::outln!("  {}", shown(command));
        }
        return Ok(ExitCode::SUCCESS);
    }
    match (&secret, &secret_file) {
        (Some(value), Some(path)) => {
            let what = match write(path, &format!("{value}\n"))? {
                Written::Unchanged => "unchanged",
                Written::New => "written, 0600",
                Written::Replaced => "written, 0600; it held something else before",
            };
            let path = path.display();
            crate::outln!(
                "secret: {path} ({what}); the service file names it, it does not hold it"
            );
        }
        (None, Some(path)) => crate::outln!("secret: {} (kept as it is)", path.display()),
        (_, None) => {}
    }
    if let Some(dir) = log_dir {
        private_fs::create_dir(dir).map_err(io("create", dir))?;
    }
    match write(&locations.file, &text)? {
        Written::New => crate::outln!("wrote {file}"),
        Written::Replaced => crate::outln!("wrote {file} (replaced the different file there)"),
        Written::Unchanged => crate::outln!("{file} is already this file"),
    }
    for command in &commands {
        manager::run(command).await?;
        if command.args.first().is_some_and(|w| w == "bootout") {
            // launchd lets go of the old job a moment later; bootstrap fails until it has.
            let deadline = Deadline::after(BOOTOUT_WAIT);
            while !deadline.expired() && platform.state().await.is_ok_and(|s| s.loaded) {
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        }
    }
    let url = daemon_url(config, None);
    let logs = platform.log_hint(&locations.log_dir);
    let why = match await_new_instance(platform, &url, Deadline::after(args.wait)).await {
        Ok(health) => {
            let (version, pid, bus) = (&health.version, health.pid, registered_words(&health));
            crate::outln!(
                "wakebridge {version} is running as pid {pid} ({url}/health); bus registration: {bus}"
            );
            crate::outln!("logs: {logs}");
            if platform == Platform::Systemd {
                crate::outln!(
                    "to keep it running while you are logged out and start it at boot: \
                     loginctl enable-linger \"$USER\""
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        Err(why) => why,
    };
    let wait = humantime::format_duration(args.wait);
    crate::errln!(
        "wakebridge service: the new instance did not answer {url}/health within {wait}: {why}"
    );
    crate::errln!("its last log lines ({logs}):");
    match platform.last_log_lines(&locations.log_dir).await {
        Ok(lines) if !lines.trim().is_empty() => {
            for line in lines.lines() {
                crate::errln!("  {line}");
            }
        }
        Ok(_) => crate::errln!("  (none)"),
        Err(e) => crate::errln!("  (cannot read them: {e})"),
    }
    Ok(ExitCode::FAILURE)
}

fn registered_words(health: &Health) -> &'static str {
    match health.registered {
        Some(true) => "registered",
        Some(false) => "not registered yet (it retries; see the logs if it stays so)",
        None => "off",
    }
}

/// What `/health` at `url` says, without the bearer: it needs none, and `status` asks it while
/// the configuration (and so the secret) may not resolve.
async fn health(url: &str) -> Result<Health, String> {
    let client = crate::http_client(HEALTH_TIMEOUT);
    let answer = client
        .map_err(|e| e.to_string())?
        .get(format!("{url}/health"))
        .send()
        .await
        .map_err(|e| format!("no answer at {url}/health ({e})"))?;
    answer.json::<Health>().await.map_err(|e| {
        format!("{url}/health does not read as wakebridge's ({e}): is that wakebridge, and this version?")
    })
}

/// Whether `pid` is the service's process or its child (launchd runs wakebridge under the
/// `/bin/sh` that maps exit 2, so launchd's pid is the shell's).
async fn is_service(pid: u32, service_pid: u32) -> bool {
    pid == service_pid
        || crate::mux::ps::parents(Deadline::after(PS_BUDGET))
            .await
            .is_ok_and(|parents| parents.get(&pid) == Some(&service_pid))
}

/// Polls the manager and `/health` until `/health` answers from the service's own process:
/// right after a restart the old instance may still answer, so the pid tells them apart. The
/// error says what was seen last.
async fn await_new_instance(
    platform: Platform,
    url: &str,
    deadline: Deadline,
) -> Result<Health, String> {
    loop {
        let seen = match platform.state().await {
            Err(e) => format!("cannot ask the service manager: {e}"),
            Ok(manager::State {
                pid: None, state, ..
            }) => format!("the service manager reports no running process (state: {state})"),
            Ok(manager::State { pid: Some(pid), .. }) => match health(url).await {
                Ok(h) if is_service(h.pid, pid).await => return Ok(h),
                Ok(h) => format!(
                    "{url}/health answers from pid {}, not the service's pid {pid} (another \
                     instance holds the port?)",
                    h.pid
                ),
                Err(e) => format!("the service runs as pid {pid}, but {e}"),
            },
        };
        if deadline.expired() {
            return Err(seen);
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline.remaining())).await;
    }
}

async fn uninstall(
    platform: Platform,
    config_flag: Option<&Path>,
    env: &Env,
) -> Result<ExitCode, ServiceError> {
    let locations = Locations::of(platform, env)?;
    let file = &locations.file;
    if !file.exists() {
        let file = file.display();
        crate::outln!("no wakebridge service is installed ({file} does not exist); nothing to do");
        return Ok(ExitCode::SUCCESS);
    }
    let (unload, after) = platform.unload_commands();
    // systemd's `disable --now` of a unit that is not running is fine.
    let loaded = platform == Platform::Systemd || platform.state().await.is_ok_and(|s| s.loaded);
    for command in unload.iter().filter(|_| loaded) {
        manager::run(command).await?;
    }
    std::fs::remove_file(file).map_err(io("remove", file))?;
    crate::outln!("removed {}", file.display());
    for command in &after {
        manager::run(command).await?;
    }
    let configured = config::load_settings(config_flag, env)
        .ok()
        .map(|s| PathBuf::from(s.bridge.secret_file))
        .filter(|path| !path.as_os_str().is_empty());
    for secret in std::iter::once(locations.default_secret).chain(configured) {
        if secret.exists() {
            let secret = secret.display();
            crate::outln!("kept the secret file {secret} (remove it yourself if no longer needed)");
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn status(
    platform: Platform,
    config: Result<&Config, &ConfigError>,
    env: &Env,
) -> Result<ExitCode, ServiceError> {
    let locations = Locations::of(platform, env)?;
    let url = config.map_or_else(
        |e| {
            crate::outln!("config: {e}");
            DEFAULT_URL.to_string()
        },
        |config| daemon_url(config, None),
    );
    let (state, answer) = (platform.state().await, health(&url).await);
    let (kind, file): (&str, _) = (platform.into(), locations.file.display());
    let installed = locations.file.exists();
    match installed {
        true => crate::outln!("service: {kind} installed at {file}"),
        false => crate::outln!("service: no {kind} installed ({file} does not exist)"),
    }
    match &state {
        Ok(s) if s.loaded || s.pid.is_some() => {
            let pid = s.pid.map_or("no process".into(), |p| format!("pid {p}"));
            crate::outln!("manager: loaded, {}, {pid}", s.state);
        }
        Ok(_) => crate::outln!("manager: not loaded"),
        Err(e) => crate::outln!("manager: cannot ask it: {e}"),
    }
    let service_pid = state.as_ref().ok().and_then(|s| s.pid);
    let serving = match (&answer, service_pid) {
        (Ok(h), Some(pid)) if is_service(h.pid, pid).await => {
            let (version, pid, bus) = (&h.version, h.pid, registered_words(h));
            crate::outln!(
                "daemon: wakebridge {version} answering at {url} as pid {pid}; bus registration: {bus}"
            );
            true
        }
        (Ok(h), _) => {
            let (version, pid) = (&h.version, h.pid);
            crate::outln!(
                "daemon: wakebridge {version} answering at {url} as pid {pid}, which is not the service's process"
            );
            false
        }
        (Err(e), _) => {
            crate::outln!("daemon: {e}");
            false
        }
    };
    if installed && !serving {
        crate::outln!("logs: {}", platform.log_hint(&locations.log_dir));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_follow_home_and_xdg_config_home() {
        let env = Env::from_pairs([("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/cfg")]);
        let l = Locations::of(Platform::Systemd, &env).unwrap();
        assert_eq!(l.file, Path::new("/cfg/systemd/user/wakebridge.service"));
        assert_eq!(l.default_secret, Path::new("/cfg/wakebridge/secret"));
        let env = Env::from_pairs([("HOME", "/Users/u"), ("XDG_CONFIG_HOME", "relative")]);
        let l = Locations::of(Platform::Launchd, &env).unwrap();
        assert_eq!(
            l.file,
            Path::new("/Users/u/Library/LaunchAgents/dev.wakebridge.plist")
        );
        assert_eq!(l.log_dir, Path::new("/Users/u/Library/Logs/wakebridge"));
        assert_eq!(
            l.default_secret,
            Path::new("/Users/u/.config/wakebridge/secret")
        );
        assert!(matches!(
            Locations::of(Platform::Systemd, &Env::empty()),
            Err(ServiceError::NoHome)
        ));
    }
}
