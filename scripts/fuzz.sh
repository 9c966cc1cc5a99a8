#!/usr/bin/env bash
# Runs the libFuzzer targets in fuzz/ for a while each.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]     (default: 60 s, every target)
#
# Needs a nightly toolchain and cargo-fuzz (`rustup toolchain install nightly`,
# `cargo install cargo-fuzz`). Nightly may not be installable on an offline machine or a
# restricted CI; when it is missing this script says so and exits 0, because the stable test
# suite already covers the same code: tests/it/fuzz_smoke.rs replays every seed in fuzz/corpus/
# and a few thousand mutated inputs through the very same check functions (fuzz/checks.rs) the
# fuzz targets call, plus property tests. What only this script adds is coverage-guided search
# (and AddressSanitizer) over hours instead of seconds.
#
# The seed corpus in fuzz/corpus/<target>/ is read, never written: new inputs go to a scratch
# corpus under fuzz/target/, crashes to fuzz/artifacts/<target>/.
set -euo pipefail

cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(event_triage panes_reader hook_input host_allowlist)
fi

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz.sh: no nightly toolchain (rustup toolchain install nightly); skipping." >&2
    echo "fuzz.sh: tests/it/fuzz_smoke.rs (cargo test --test it fuzz_smoke::) covers the same checks on stable." >&2
    exit 0
fi
if ! cargo +nightly fuzz --help >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz); skipping." >&2
    exit 0
fi

for target in "${targets[@]}"; do
    scratch="target/corpus-scratch/$target"
    mkdir -p "$scratch"
    echo "fuzz.sh: $target for ${seconds}s"
    cargo +nightly fuzz run "$target" "$scratch" "corpus/$target" -- \
        -max_total_time="$seconds" -max_len=65536 -timeout=10
done
