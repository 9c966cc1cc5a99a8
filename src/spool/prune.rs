//! Spool pruning: deletes old `<sid>.jsonl` spools and stale drainer claims (`<sid>.jsonl.*`)
//! and keeps their total size under a cap (reference 10.2). A live spool goes only under its
//! `<sid>.lock` and unchanged since the scan; a claim only once past the age limit. Nothing else
//! in the wake dir is touched; no symlink is followed.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::PruneSettings;
use crate::wire::session_id::SessionId;

const SPOOL_SUFFIX: &str = "jsonl";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpoolKind {
    /// `<sid>.jsonl`: the bridge appends to it.
    Live,
    /// `<sid>.jsonl.<anything>` (normally `.draining.<uniq>.<seq>`): a drainer's claim.
    Claimed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolFile {
    pub path: PathBuf,
    pub size: u64,
    pub mtime: SystemTime,
    pub kind: SpoolKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub path: PathBuf,
    pub size: u64,
    pub age: Duration,
}

#[derive(Debug, Default)]
pub struct PruneReport {
    pub removed: Vec<Removed>,
    /// Live spools left alone because an appender or drainer held their lock.
    pub skipped_locked: Vec<PathBuf>,
    pub failures: Vec<PruneError>,
}

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error("cannot list the wake dir {} for spool pruning: {source}; check it exists and is readable", dir.display())]
    ReadDir { dir: PathBuf, source: io::Error },
    #[error(
        "cannot open the spool lock {} ({source}); if it is a symlink or not a regular file, \
         remove it so appenders and the pruner can lock the spool",
        path.display()
    )]
    Lock { path: PathBuf, source: io::Error },
    #[error("cannot inspect spool file {}: {source}", path.display())]
    Stat { path: PathBuf, source: io::Error },
    #[error("cannot delete spool file {}: {source}; check the wake dir's permissions", path.display())]
    Remove { path: PathBuf, source: io::Error },
}

/// Recognises `<sid>.jsonl` and `<sid>.jsonl.<suffix>`; everything else is not ours to touch.
pub fn classify_name(name: &str) -> Option<(&str, SpoolKind)> {
    let (sid, rest) = name.split_once('.')?;
    if !SessionId::is_valid(sid) {
        return None;
    }
    if rest == SPOOL_SUFFIX {
        return Some((sid, SpoolKind::Live));
    }
    let suffix = rest.strip_prefix(SPOOL_SUFFIX)?.strip_prefix('.')?;
    (!suffix.is_empty()).then_some((sid, SpoolKind::Claimed))
}

fn age_at(now: SystemTime, mtime: SystemTime) -> Duration {
    // A file stamped in the future (clock step) counts as brand new.
    now.duration_since(mtime).unwrap_or(Duration::ZERO)
}

/// Chooses what to delete: every file older than `max_age`, then live spools oldest first until
/// the rest totals at most `max_total_bytes`. Claims count toward the total but go only by age
/// (they are a drainer's). Expired files first, then cap removals, each oldest first.
pub fn select_for_pruning(
    files: &[SpoolFile],
    now: SystemTime,
    max_age: Duration,
    max_total_bytes: u64,
) -> Vec<&SpoolFile> {
    let mut oldest_first: Vec<&SpoolFile> = files.iter().collect();
    oldest_first.sort_by(|a, b| a.mtime.cmp(&b.mtime).then_with(|| a.path.cmp(&b.path)));
    let (mut selected, remaining): (Vec<&SpoolFile>, Vec<&SpoolFile>) = oldest_first
        .into_iter()
        .partition(|file| age_at(now, file.mtime) > max_age);
    // u128: a sum of u64 sizes cannot overflow it, so the arithmetic stays exact.
    let mut total: u128 = remaining.iter().map(|file| u128::from(file.size)).sum();
    for file in remaining {
        if total <= u128::from(max_total_bytes) {
            break;
        }
        if file.kind == SpoolKind::Live {
            selected.push(file);
            total -= u128::from(file.size);
        }
    }
    selected
}

/// The regular files directly in `wake_dir` that `classify_name` accepts; no symlink followed.
pub fn scan(wake_dir: &Path) -> Result<Vec<SpoolFile>, PruneError> {
    match regular_files(wake_dir, |name| classify_name(name).map(|(_, kind)| kind)) {
        Ok(files) => Ok(files
            .into_iter()
            .map(|(path, size, mtime, kind)| SpoolFile {
                path,
                size,
                mtime,
                kind,
            })
            .collect()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(PruneError::ReadDir {
            dir: wake_dir.to_path_buf(),
            source,
        }),
    }
}

/// Path, size and mtime of the regular files directly in `dir` whose name `kind_of` accepts,
/// with their kind. DirEntry::metadata is lstat on Unix: a symlink reports itself and is skipped.
fn regular_files<K>(
    dir: &Path,
    kind_of: impl Fn(&str) -> Option<K>,
) -> io::Result<Vec<(PathBuf, u64, SystemTime, K)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let Some(kind) = entry.file_name().to_str().and_then(&kind_of) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.file_type().is_file() {
            continue;
        }
        let Ok(mtime) = meta.modified() else { continue };
        files.push((entry.path(), meta.len(), mtime, kind));
    }
    Ok(files)
}

/// One pruning round of `wake_dir` at `now`: scan, select, delete carefully, log each removal.
pub fn prune_once(
    wake_dir: &Path,
    settings: &PruneSettings,
    now: SystemTime,
) -> Result<PruneReport, PruneError> {
    let files = scan(wake_dir)?;
    let mut report = PruneReport::default();
    for file in select_for_pruning(&files, now, settings.max_age, settings.max_total_bytes) {
        let outcome = match file.kind {
            SpoolKind::Live => remove_live(wake_dir, file),
            SpoolKind::Claimed => remove_stale_claim(file, now, settings.max_age),
        };
        match outcome {
            Ok(Outcome::Removed(removed)) => {
                tracing::info!(
                    path = %removed.path.display(),
                    size = removed.size,
                    age = %humantime::format_duration(Duration::from_secs(removed.age.as_secs())),
                    "pruned spool file"
                );
                report.removed.push(removed);
            }
            Ok(Outcome::Locked) => {
                tracing::debug!(path = %file.path.display(), "spool lock busy; pruning it next round");
                report.skipped_locked.push(file.path.clone());
            }
            // Changed (or vanished) between the scan and the deletion: looked at next round.
            Ok(Outcome::Changed) => {}
            Err(err) => {
                tracing::warn!(error = %err, "spool pruning skipped a file");
                report.failures.push(err);
            }
        }
    }
    Ok(report)
}

enum Outcome {
    Removed(Removed),
    Locked,
    Changed,
}

fn remove_live(wake_dir: &Path, file: &SpoolFile) -> Result<Outcome, PruneError> {
    let name = file.path.file_name().and_then(|name| name.to_str());
    let Some((sid, _)) = name.and_then(classify_name) else {
        return Ok(Outcome::Changed);
    };
    let lock_path = wake_dir.join(format!("{sid}.lock"));
    let locked = crate::private_fs::try_lock(&lock_path).map_err(|source| PruneError::Lock {
        path: lock_path,
        source,
    })?;
    let Some(_lock) = locked else {
        return Ok(Outcome::Locked);
    };
    // Under the lock nobody can append or claim; re-check that we saw the file's last state.
    match current_state(&file.path)? {
        Some((size, mtime)) if size == file.size && mtime == file.mtime => {
            remove(file, SystemTime::now())
        }
        _ => Ok(Outcome::Changed),
    }
}

fn remove_stale_claim(
    file: &SpoolFile,
    now: SystemTime,
    max_age: Duration,
) -> Result<Outcome, PruneError> {
    match current_state(&file.path)? {
        Some((_, mtime)) if age_at(now, mtime) > max_age => remove(file, now),
        _ => Ok(Outcome::Changed),
    }
}

/// Size and mtime of a regular file now; `None` if it is gone or no longer a regular file.
fn current_state(path: &Path) -> Result<Option<(u64, SystemTime)>, PruneError> {
    let stat_error = |source| PruneError::Stat {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(stat_error(err)),
    };
    if !meta.file_type().is_file() {
        return Ok(None);
    }
    Ok(Some((meta.len(), meta.modified().map_err(stat_error)?)))
}

fn remove(file: &SpoolFile, now: SystemTime) -> Result<Outcome, PruneError> {
    match std::fs::remove_file(&file.path) {
        Ok(()) => Ok(Outcome::Removed(Removed {
            path: file.path.clone(),
            size: file.size,
            age: age_at(now, file.mtime),
        })),
        // A drainer took it meanwhile (reference 6.4: ENOENT is benign).
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Outcome::Changed),
        Err(source) => Err(PruneError::Remove {
            path: file.path.clone(),
            source,
        }),
    }
}

/// Deletes the regular files directly in `dir` that `is_ours` accepts and older than `max_age`:
/// the state files the context monitor and the status line leave behind.
pub fn prune_old_files(
    dir: &Path,
    now: SystemTime,
    max_age: Duration,
    is_ours: impl Fn(&str) -> bool,
) -> Vec<Removed> {
    let files = regular_files(dir, |name| is_ours(name).then_some(())).unwrap_or_default();
    files
        .into_iter()
        .map(|(path, size, mtime, ())| Removed {
            path,
            size,
            age: age_at(now, mtime),
        })
        .filter(|file| file.age > max_age && std::fs::remove_file(&file.path).is_ok())
        .collect()
}

/// Prunes `wake_dir` now and every `settings.interval` until `shutdown`, on the blocking pool.
pub async fn run(wake_dir: PathBuf, settings: PruneSettings, shutdown: CancellationToken) {
    loop {
        let (dir, round) = (wake_dir.clone(), settings.clone());
        let done = tokio::task::spawn_blocking(move || prune_once(&dir, &round, SystemTime::now()));
        match done.await {
            Ok(Ok(report)) if !report.removed.is_empty() => tracing::debug!(
                removed = report.removed.len(),
                skipped_locked = report.skipped_locked.len(),
                "spool pruning round done"
            ),
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::warn!(error = %err, "spool pruning round failed"),
            Err(err) => tracing::error!(error = %err, "spool pruning round panicked"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::session_id::MAX_SESSION_ID_LEN;
    use std::fs::File;
    #[test]
    fn old_files_that_are_ours_go_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let now = SystemTime::now();
        let old = now - Duration::from_secs(3600);
        for name in ["old-a", "young-b", "other.txt"] {
            std::fs::write(dir.path().join(name), "x").expect("write");
        }
        std::os::unix::fs::symlink(dir.path().join("old-a"), dir.path().join("link-c"))
            .expect("symlink");
        for name in ["old-a", "other.txt"] {
            File::options()
                .write(true)
                .open(dir.path().join(name))
                .and_then(|f| f.set_modified(old))
                .expect("age");
        }
        let removed = prune_old_files(dir.path(), now, Duration::from_secs(60), |n| {
            !n.ends_with(".txt")
        });
        let names: Vec<_> = removed
            .iter()
            .map(|r| r.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["old-a"]);
        assert!(dir.path().join("young-b").exists() && dir.path().join("other.txt").exists());
        assert!(
            dir.path().join("link-c").symlink_metadata().is_ok(),
            "a symlink is never removed"
        );
        assert!(
            prune_old_files(&dir.path().join("missing"), now, Duration::ZERO, |_| true).is_empty()
        );
    }

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn file(name: &str, size: u64, mtime_secs: u64, kind: SpoolKind) -> SpoolFile {
        SpoolFile {
            path: PathBuf::from(name),
            size,
            mtime: at(mtime_secs),
            kind,
        }
    }

    fn names(files: &[&SpoolFile]) -> Vec<String> {
        files.iter().map(|f| f.path.display().to_string()).collect()
    }

    const NOW: u64 = 100 * 24 * 60 * 60;

    #[test]
    fn keeps_young_files_under_the_cap() {
        let files = [
            file("a.jsonl", 10, NOW - 60, SpoolKind::Live),
            file("b.jsonl", 10, NOW - 3600, SpoolKind::Live),
        ];
        assert!(select_for_pruning(&files, at(NOW), 7 * DAY, 100).is_empty());
    }

    #[test]
    fn removes_every_file_older_than_max_age_whatever_the_total() {
        let files = [
            file("old.jsonl", 1, NOW - 8 * 86_400, SpoolKind::Live),
            file("young.jsonl", 1, NOW - 86_400, SpoolKind::Live),
            file(
                "old.jsonl.draining.x.0",
                1,
                NOW - 9 * 86_400,
                SpoolKind::Claimed,
            ),
        ];
        let selected = select_for_pruning(&files, at(NOW), 7 * DAY, u64::MAX);
        assert_eq!(names(&selected), ["old.jsonl.draining.x.0", "old.jsonl"]);
    }

    #[test]
    fn exactly_max_age_is_kept() {
        let files = [file("a.jsonl", 1, NOW - 7 * 86_400, SpoolKind::Live)];
        assert!(select_for_pruning(&files, at(NOW), 7 * DAY, u64::MAX).is_empty());
    }

    #[test]
    fn cap_removes_oldest_live_first_until_total_fits() {
        let files = [
            file("newest.jsonl", 40, NOW - 10, SpoolKind::Live),
            file("oldest.jsonl", 40, NOW - 30, SpoolKind::Live),
            file("middle.jsonl", 40, NOW - 20, SpoolKind::Live),
        ];
        // 120 bytes against a cap of 50: the two oldest must go, leaving 40.
        let selected = select_for_pruning(&files, at(NOW), 7 * DAY, 50);
        assert_eq!(names(&selected), ["oldest.jsonl", "middle.jsonl"]);
    }

    #[test]
    fn total_equal_to_cap_is_under_it() {
        let files = [
            file("a.jsonl", 50, NOW - 20, SpoolKind::Live),
            file("b.jsonl", 50, NOW - 10, SpoolKind::Live),
        ];
        assert!(select_for_pruning(&files, at(NOW), 7 * DAY, 100).is_empty());
        assert_eq!(
            names(&select_for_pruning(&files, at(NOW), 7 * DAY, 99)),
            ["a.jsonl"]
        );
    }

    #[test]
    fn age_removals_count_before_the_cap() {
        let files = [
            file("expired.jsonl", 100, NOW - 8 * 86_400, SpoolKind::Live),
            file("young.jsonl", 50, NOW - 10, SpoolKind::Live),
        ];
        // Once the expired file is gone, 50 bytes fit the cap: nothing else goes.
        let selected = select_for_pruning(&files, at(NOW), 7 * DAY, 60);
        assert_eq!(names(&selected), ["expired.jsonl"]);
    }

    #[test]
    fn young_claims_count_toward_the_cap_but_are_never_chosen_for_it() {
        let files = [
            file("s.jsonl.draining.u.0", 100, NOW - 50, SpoolKind::Claimed),
            file("a.jsonl", 10, NOW - 40, SpoolKind::Live),
            file("b.jsonl", 10, NOW - 30, SpoolKind::Live),
        ];
        let selected = select_for_pruning(&files, at(NOW), 7 * DAY, 105);
        assert_eq!(names(&selected), ["a.jsonl", "b.jsonl"]);
    }

    #[test]
    fn future_mtime_counts_as_new() {
        let files = [file("a.jsonl", 1, NOW + 86_400, SpoolKind::Live)];
        assert!(select_for_pruning(&files, at(NOW), Duration::ZERO, u64::MAX).is_empty());
    }

    #[test]
    fn equal_mtimes_are_ordered_by_path() {
        let files = [
            file("b.jsonl", 10, NOW - 10, SpoolKind::Live),
            file("a.jsonl", 10, NOW - 10, SpoolKind::Live),
        ];
        assert_eq!(
            names(&select_for_pruning(&files, at(NOW), 7 * DAY, 10)),
            ["a.jsonl"]
        );
    }

    #[test]
    fn huge_sizes_do_not_overflow() {
        let files = [
            file("a.jsonl", u64::MAX, NOW - 20, SpoolKind::Live),
            file("b.jsonl", u64::MAX, NOW - 10, SpoolKind::Live),
        ];
        assert_eq!(
            names(&select_for_pruning(&files, at(NOW), 7 * DAY, 0)),
            ["a.jsonl", "b.jsonl"]
        );
    }

    #[test]
    fn classifies_only_spool_names() {
        assert_eq!(classify_name("abc.jsonl"), Some(("abc", SpoolKind::Live)));
        assert_eq!(
            classify_name("A_b-9.jsonl.draining.123-456.0"),
            Some(("A_b-9", SpoolKind::Claimed))
        );
        for other in [
            "abc.lock",
            "abc.busy",
            "panes.json",
            "panes.lock",
            "bridge.singleton.lock",
            ".jsonl",
            "abc.jsonl.",
            "abc.jsonlx",
            "abc.json",
            "a b.jsonl",
            "a/b.jsonl",
            "abc",
            "hook.abcd.lock",
        ] {
            assert_eq!(classify_name(other), None, "{other}");
        }
        let longest = "x".repeat(MAX_SESSION_ID_LEN);
        assert!(classify_name(&format!("{longest}.jsonl")).is_some());
        assert!(classify_name(&format!("{longest}x.jsonl")).is_none());
    }

    #[test]
    fn keeps_a_live_spool_that_changed_since_the_scan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s1.jsonl");
        std::fs::write(&path, b"{}\n").expect("write");
        let scanned = SpoolFile {
            path: path.clone(),
            size: 3,
            // The scan saw an older stamp than the file has now: an append happened since.
            mtime: SystemTime::now() - Duration::from_secs(3600),
            kind: SpoolKind::Live,
        };
        assert!(matches!(
            remove_live(dir.path(), &scanned),
            Ok(Outcome::Changed)
        ));
        assert!(path.exists());
    }

    #[test]
    fn skips_a_live_spool_whose_lock_is_held_by_another_open_file_description() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s1.jsonl");
        std::fs::write(&path, b"{}\n").expect("write");
        let meta = std::fs::metadata(&path).expect("stat");
        let holder = crate::private_fs::lock(&dir.path().join("s1.lock")).expect("flock");
        let scanned = SpoolFile {
            path: path.clone(),
            size: meta.len(),
            mtime: meta.modified().expect("mtime"),
            kind: SpoolKind::Live,
        };
        assert!(matches!(
            remove_live(dir.path(), &scanned),
            Ok(Outcome::Locked)
        ));
        assert!(path.exists());
        holder.unlock().expect("unlock");
        assert!(matches!(
            remove_live(dir.path(), &scanned),
            Ok(Outcome::Removed(_))
        ));
        assert!(!path.exists());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn files() -> impl Strategy<Value = Vec<SpoolFile>> {
            proptest::collection::vec((0_u64..1000, 0_u64..20 * 86_400, any::<bool>()), 0..40)
                .prop_map(|specs| {
                    specs
                        .into_iter()
                        .enumerate()
                        .map(|(i, (size, age, claimed))| SpoolFile {
                            path: PathBuf::from(format!("f{i}")),
                            size,
                            mtime: at(NOW - age),
                            kind: if claimed {
                                SpoolKind::Claimed
                            } else {
                                SpoolKind::Live
                            },
                        })
                        .collect()
                })
        }

        proptest! {
            #[test]
            fn selection_honours_age_cap_and_claims(
                files in files(),
                max_age_days in 0_u64..15,
                cap in 0_u64..20_000,
            ) {
                let max_age = Duration::from_secs(max_age_days * 86_400);
                let selected = select_for_pruning(&files, at(NOW), max_age, cap);
                let is_selected = |f: &SpoolFile| selected.iter().any(|s| s.path == f.path);
                let expired = |f: &SpoolFile| age_at(at(NOW), f.mtime) > max_age;
                for f in &files {
                    // Every expired file goes; a young claim never does.
                    if expired(f) { prop_assert!(is_selected(f)); }
                    if f.kind == SpoolKind::Claimed && !expired(f) {
                        prop_assert!(!is_selected(f));
                    }
                }
                let kept: Vec<&SpoolFile> = files.iter().filter(|f| !is_selected(f)).collect();
                let kept_total: u64 = kept.iter().map(|f| f.size).sum();
                let kept_live = kept.iter().any(|f| f.kind == SpoolKind::Live);
                // Under the cap, unless only claims are left to blame.
                prop_assert!(kept_total <= cap || !kept_live);
                // Cap removals are the oldest live files: none kept is older than one removed.
                for removed in files.iter().filter(|f| is_selected(f) && !expired(f)) {
                    prop_assert_eq!(removed.kind, SpoolKind::Live);
                    for k in kept.iter().filter(|k| k.kind == SpoolKind::Live) {
                        prop_assert!(k.mtime >= removed.mtime);
                    }
                }
                // Nothing is removed for the cap that did not need to go: putting back the
                // newest cap removal would exceed the cap.
                if let Some(last) = files
                    .iter()
                    .filter(|f| is_selected(f) && !expired(f))
                    .max_by_key(|f| (f.mtime, f.path.clone()))
                {
                    prop_assert!(kept_total + last.size > cap);
                }
            }
        }
    }
}
