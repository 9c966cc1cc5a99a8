#!/usr/bin/env bash
# One `POST /hook` load run against a wakebridge binary: `serve` started fresh in a private dir
# (registration off, a private tmux socket), `wrk -t1 -c16 -d10s` with benches/wrk_hook.lua, and
# the daemon's CPU per request from /proc/<pid>/stat. Run it for two builds in turn to compare.
#
#   scripts/hook-ab.sh <wakebridge binary> <spool|mux> <port>
set -euo pipefail
bin=$1 backend=$2 port=$3
here=$(cd "$(dirname "$0")/.." && pwd)
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
mkdir -m 700 "$D/run"
env -i PATH=/usr/bin:/bin HOME="$D/home" AGENT_EVENT_BUS_WAKE_DIR="$D/wake" \
  XDG_RUNTIME_DIR="$D/run" XDG_STATE_HOME="$D/state" XDG_CONFIG_HOME="$D/config" \
  WAKEBRIDGE_REGISTRATION__ENABLED=false WAKEBRIDGE_MUX__TMUX_SOCKET="$D/tmux.sock" \
  "$bin" serve --backend "$backend" --port "$port" >"$D/log" 2>&1 &
pid=$!
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
before=$(ticks)
out=$(wrk -t1 -c16 -d10s --latency -s "$here/benches/wrk_hook.lua" "http://127.0.0.1:$port/hook")
after=$(ticks)
kill "$pid"
wait "$pid" 2>/dev/null || true
requests=$(awk '/requests in/ {print $1}' <<<"$out")
summary=$(grep -E 'Requests/sec|50%|99%' <<<"$out" | tr -s ' ' | tr '\n' ' ')
# Clock ticks are 10 ms: CPU per request in microseconds.
echo "$(basename "$bin") $backend: $summary cpu/req $(((after - before) * 10000 / requests)) us"
