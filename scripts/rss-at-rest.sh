#!/usr/bin/env bash
# The daemon's memory at rest: `serve` with its defaults in a fresh private dir (registration
# off), 6 s idle, then VmRSS, RssAnon, RssFile and Threads from /proc/<pid>/status. Run it for
# two builds in turn to compare (docs/benchmarks.md, "Memory").
#
#   scripts/rss-at-rest.sh <wakebridge binary> <port>
set -euo pipefail
bin=$1 port=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
mkdir -m 700 "$D/run"
env -i HOME="$D/home" XDG_RUNTIME_DIR="$D/run" XDG_STATE_HOME="$D/state" \
  XDG_CONFIG_HOME="$D/config" AGENT_EVENT_BUS_WAKE_DIR="$D/wake" \
  WAKEBRIDGE_REGISTRATION__ENABLED=false PATH=/usr/bin:/bin \
  "$bin" serve --port "$port" >"$D/log" 2>&1 &
pid=$!
sleep 6
grep -E 'VmRSS|RssAnon|RssFile|Threads' "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' '
echo
kill "$pid"
wait "$pid" 2>/dev/null || true
