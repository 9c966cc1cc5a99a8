//! The fuzz targets on stable Rust, so every test run exercises them without nightly: each
//! target's seed corpus (`fuzz/corpus/<target>/`) is replayed, then a few thousand inputs
//! mutated from it by a seeded generator, through the very functions the libFuzzer binaries call
//! (`fuzz/checks.rs`). Property tests pin the Host canonicaliser, the printable rule (against
//! Python's `str.isprintable` when python3 is present) and event triage.
//!
//! `WAKEBRIDGE_SMOKE_SEED=<n>` changes the mutation seed; `WAKEBRIDGE_SMOKE_ROUNDS=<n>` the
//! number of mutated inputs per target.

#[allow(dead_code)]
#[path = "../../fuzz/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use wakebridge::config::hosts::{HostAllowlist, canonical_entry, canonical_host};
use wakebridge::wakedir::printable::{is_printable, is_printable_char, is_valid_string};
use wakebridge::wire::event::{Triage, triage};
use wakebridge::wire::session_id::SessionId;

use crate::common;

/// Mutated inputs per target by default: enough to reach the odd paths of each parser in a few
/// seconds of a debug build.
const DEFAULT_ROUNDS: usize = 3000;
/// Mutations stacked on one input, at most.
const MAX_STACKED_MUTATIONS: usize = 6;
/// Seeds every corpus must at least hold (the brief's "a dozen meaningful files").
const MIN_SEEDS: usize = 12;
/// Fragments a mutation may splice in: the tokens the parsers treat specially.
const DICTIONARY: &[&[u8]] = &[
    b"\"session:",
    b"\"signal_level\": \"actionable\"",
    b"\"channel\": ",
    b"NaN",
    b"-Infinity",
    b"1e400",
    b"-0",
    b"\\ud800",
    b"\\udc00",
    b"\\u0000",
    b"\\u001b",
    b"\xff",
    b"\x00",
    b"[[[[[[[[",
    b"{\"mux\": \"zellij\", \"pane\": \"0\", \"session\": ",
    b"\"hook_event_name\": \"SessionStart\"",
    b"../",
    b"[::1]",
    b":8082",
    b"\n",
    b",",
];

type Target = fn(&[u8]);

const TARGETS: &[(&str, Target)] = &[
    ("event_triage", checks::event_triage),
    ("panes_reader", checks::panes_reader),
    ("hook_input", checks::hook_input),
    ("host_allowlist", checks::host_allowlist),
];

/// xorshift64*: deterministic, seedable, no dependency; quality is ample for mutation choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir(target))
        .expect("corpus dir exists")
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            let bytes = std::fs::read(e.path()).expect("read seed");
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    seeds.sort();
    seeds
}

/// One random edit: flip, insert, delete, duplicate a run, splice a dictionary token or a piece
/// of another seed, or truncate.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[(String, Vec<u8>)]) {
    let at = rng.below(input.len() + 1);
    match rng.below(8) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        1 => input.insert(at, rng.next() as u8),
        2 if !input.is_empty() => {
            let i = rng.below(input.len());
            let len = rng.below(8).min(input.len() - i);
            input.drain(i..i + len);
        }
        3 if !input.is_empty() => {
            let i = rng.below(input.len());
            let len = rng.below(32).min(input.len() - i);
            let run = input[i..i + len].to_vec();
            input.splice(at..at, run);
        }
        4 | 5 => {
            let token = DICTIONARY[rng.below(DICTIONARY.len())];
            input.splice(at..at, token.iter().copied());
        }
        6 => {
            let other = &seeds[rng.below(seeds.len())].1;
            if !other.is_empty() {
                let i = rng.below(other.len());
                let len = rng.below(64).min(other.len() - i);
                input.splice(at..at, other[i..i + len].iter().copied());
            }
        }
        _ => input.truncate(at),
    }
}

fn replay_and_mutate(name: &str, target: Target) {
    let seeds = corpus(name);
    assert!(
        seeds.len() >= MIN_SEEDS,
        "{name}: only {} seeds in {}",
        seeds.len(),
        corpus_dir(name).display()
    );
    for (file, bytes) in &seeds {
        let outcome = std::panic::catch_unwind(|| target(bytes));
        assert!(outcome.is_ok(), "{name}: seed {file} failed its invariants");
    }
    let seed = env_number("WAKEBRIDGE_SMOKE_SEED", 0x5eed_f022);
    let rounds = env_number("WAKEBRIDGE_SMOKE_ROUNDS", DEFAULT_ROUNDS as u64);
    let mut rng = Rng(seed | 1);
    for round in 0..rounds {
        let mut input = seeds[rng.below(seeds.len())].1.clone();
        for _ in 0..=rng.below(MAX_STACKED_MUTATIONS) {
            mutate(&mut rng, &mut input, &seeds);
        }
        let outcome = std::panic::catch_unwind(|| target(&input));
        assert!(
            outcome.is_ok(),
            "{name}: mutated input #{round} (seed {seed}) failed its invariants: {:?}",
            String::from_utf8_lossy(&input)
        );
    }
}

#[test]
fn every_fuzz_target_survives_its_corpus_and_mutations() {
    for (name, target) in TARGETS {
        replay_and_mutate(name, *target);
    }
    checks::remove_scratch_dir();
}

#[test]
fn every_fuzz_target_has_a_binary_and_a_corpus() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/Cargo.toml"))
            .expect("fuzz/Cargo.toml");
    for (name, _) in TARGETS {
        assert!(
            manifest.contains(&format!("path = \"fuzz_targets/{name}.rs\"")),
            "{name} has no [[bin]] in fuzz/Cargo.toml"
        );
        assert!(corpus_dir(name).is_dir(), "{name} has no corpus");
    }
}

#[test]
fn the_real_bus_dm_is_delivered_with_its_own_bytes_as_the_line() {
    // The bus serialises with json.dumps, so the spool line is the body plus a newline.
    let seeds = corpus("event_triage");
    let (_, dm) = seeds
        .iter()
        .find(|(name, _)| name == "bus-dm-observed.json")
        .expect("observed DM seed");
    match triage(dm) {
        Ok(Triage::Deliver(event)) => {
            assert_eq!(event.target, "50c5905d-fc5f-4524-92d9-ba1d7cecde8d");
            assert_eq!(event.line.as_bytes(), [dm.as_slice(), b"\n"].concat());
        }
        other => panic!("observed DM not delivered: {other:?}"),
    }
}

#[test]
fn printable_rule_agrees_with_python_isprintable() {
    // One python3 run prints a 0/1 per code point (surrogates included, as Python has them).
    let script = "import sys,unicodedata as u\n\
                  sys.stdout.write(u.unidata_version+'\\n')\n\
                  sys.stdout.write(''.join('1' if chr(c).isprintable() else '0' for c in range(0x110000))+'\\n')\n\
                  sys.stdout.write(''.join('1' if u.category(chr(c))=='Cn' else '0' for c in range(0x110000)))";
    let Ok(out) = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
    else {
        // Outside CI the category proptest still covers the rule.
        common::skip_or_fail("python3 does not run", common::GET_PYTHON3);
        return;
    };
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("ascii");
    let mut lines = text.lines();
    let version = lines.next().expect("version line");
    let printable = lines.next().expect("printable bitmap").as_bytes();
    let unassigned = lines.next().expect("category bitmap").as_bytes();
    let mut newer_than_python = 0usize;
    for code in 0..0x110000u32 {
        let Some(c) = char::from_u32(code) else {
            // Surrogates are not chars in Rust; Python calls them non-printable.
            assert_eq!(printable[code as usize], b'0', "U+{code:04X}");
            continue;
        };
        let python = printable[code as usize] == b'1';
        let ours = is_printable_char(c);
        if python != ours {
            // Only characters assigned after Python's Unicode version may differ, and only in
            // the documented direction (we accept, Python calls them unassigned).
            assert!(
                ours && unassigned[code as usize] == b'1',
                "U+{code:04X}: python says {python}, we say {ours} (Python Unicode {version})"
            );
            newer_than_python += 1;
        }
    }
    eprintln!("printable: {newer_than_python} code points newer than Python's Unicode {version}");
}

fn hostname() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9][a-zA-Z0-9.-]{0,30}"
}

/// Arbitrary JSON values, numbers as text so floats, huge integers and -0 all occur.
fn json_value() -> impl Strategy<Value = Value> {
    let number = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        "-?[1-9][0-9]{18,40}",
        Just("-0".to_string()),
        Just("-0.0".to_string()),
        Just("1e400".to_string()),
    ]
    .prop_map(|text| serde_json::from_str::<Value>(&text).unwrap_or(Value::Null));
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn channel() -> impl Strategy<Value = String> {
    prop_oneof![
        "session:[A-Za-z0-9_-]{1,64}",
        "session:.{0,70}",
        "session:[A-Za-z0-9_./\\\\:-]{0,80}",
        ".{0,20}",
        Just("all".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn canonical_host_is_a_fixed_point_of_itself(raw in any::<String>()) {
        let host = canonical_host(&raw);
        if !host.contains(':') && !host.starts_with('[') {
            prop_assert_eq!(canonical_host(&host), host.clone());
        }
        if host.contains(':') && host.parse::<std::net::Ipv6Addr>().is_ok() {
            prop_assert_eq!(canonical_host(&format!("[{host}]")), host);
        }
    }

    #[test]
    fn ports_are_stripped_from_names_and_addresses(
        name in hostname(),
        v4 in any::<[u8; 4]>(),
        v6 in any::<[u16; 8]>(),
        port in any::<u16>(),
    ) {
        prop_assert_eq!(canonical_host(&format!("{name}:{port}")), canonical_host(&name));
        let v4 = std::net::Ipv4Addr::from(v4);
        prop_assert_eq!(canonical_host(&format!("{v4}:{port}")), v4.to_string());
        let v6 = std::net::Ipv6Addr::from(v6);
        prop_assert_eq!(canonical_host(&format!("[{v6}]:{port}")), v6.to_string());
        prop_assert_eq!(canonical_host(&format!("[{v6}]")), v6.to_string());
    }

    #[test]
    fn every_ipv6_spelling_is_one_host(segs in any::<[u16; 8]>(), port in any::<u16>(), upper in any::<bool>()) {
        let ip = std::net::Ipv6Addr::from(segs);
        let padded = segs.iter().map(|s| format!("{s:04x}")).collect::<Vec<_>>().join(":");
        let bare = segs.iter().map(|s| format!("{s:x}")).collect::<Vec<_>>().join(":");
        let spellings = [padded, bare, ip.to_string()];
        let list = HostAllowlist::new(canonical_entry(&ip.to_string()));
        for spelling in spellings {
            let spelling = if upper { spelling.to_ascii_uppercase() } else { spelling };
            prop_assert_eq!(canonical_host(&format!("[{spelling}]:{port}")), ip.to_string());
            prop_assert_eq!(canonical_entry(&spelling), Some(ip.to_string()));
            let header = format!("[{spelling}]:{port}");
            prop_assert!(list.allows(&header), "{} not allowed", header);
        }
    }

    #[test]
    fn empty_host_is_never_allowed(entries in prop::collection::vec(any::<String>(), 0..8), raw in any::<String>()) {
        let list = HostAllowlist::new(entries.iter().filter_map(|e| canonical_entry(e)));
        prop_assert!(!list.allows(""));
        prop_assert!(list.iter().all(|h| !h.is_empty()));
        if canonical_host(&raw).is_empty() {
            prop_assert!(!list.allows(&raw));
        }
    }

    #[test]
    fn printable_matches_the_category_definition_on_strings(s in any::<String>()) {
        use unicode_general_category::get_general_category;
        let by_definition = s.chars().all(|c| {
            c == ' ' || !["Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"]
                .contains(&get_general_category(c).abbreviation())
        });
        prop_assert_eq!(is_printable(&s), by_definition);
        prop_assert_eq!(is_valid_string(&s), !s.is_empty() && by_definition);
    }

    #[test]
    fn triage_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        checks::event_triage(&bytes);
    }

    #[test]
    fn triage_delivers_only_safe_targets_and_round_trips_the_line(
        payload in json_value(),
        channel in channel(),
        level in prop_oneof![Just(json!("actionable")), Just(json!("info")), Just(Value::Null)],
        event_id in prop_oneof![any::<u32>().prop_map(|n| json!(n)), "[ -~]{0,12}".prop_map(Value::String)],
    ) {
        let body = json!({
            "event_id": event_id,
            "payload": payload,
            "channel": channel,
            "signal_level": level,
        });
        let bytes = serde_json::to_vec(&body).expect("serialisable");
        checks::event_triage(&bytes);
        if let Ok(Triage::Deliver(event)) = triage(&bytes) {
            prop_assert!(SessionId::is_valid(&event.target));
            prop_assert_eq!(format!("session:{}", event.target), channel);
            let reread: Value = serde_json::from_str(event.line.trim_end_matches('\n')).expect("line parses");
            prop_assert!(checks::same_json(&reread, &body));
        } else if level == json!("actionable") {
            let safe = channel.strip_prefix("session:").is_some_and(SessionId::is_valid);
            prop_assert!(!safe || checks_has_overflow(&body), "safe channel {channel:?} not delivered");
        }
    }
}

fn checks_has_overflow(body: &Value) -> bool {
    matches!(
        triage(&serde_json::to_vec(body).unwrap_or_default()),
        Err(wakebridge::wire::event::EventError::NotSerializable)
    )
}
