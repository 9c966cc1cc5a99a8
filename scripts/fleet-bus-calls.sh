#!/usr/bin/env bash
# The bus calls of one daemon with the fleet on, at rest: the real agent-event-bus (from
# $WB_TEST_BUS, default the venv of ../shared/vendor/agent-event-bus/VENDORED.md) on a private
# database and log, the daemon with a fresh fleet key and no session, then its tool calls as
# the bus logged them over <seconds> (after 20 s for the start's registration and first status).
# With `registration`, the daemon registers its webhooks too (the bridge's and the fleet's) and
# their keepers' calls are counted with the rest.
#
#   scripts/fleet-bus-calls.sh <wakebridge binary> [seconds, default 300] [registration]
set -euo pipefail
bin=$1 secs=${2:-300}
registration=$([ "${3:-}" = registration ] && echo true || echo false)
bus=${WB_TEST_BUS:-/tmp/aeb-venv/bin/agent-event-bus}
D=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"' EXIT
mkdir -p "$D/home" "$D/run"
chmod 700 "$D/run"
head -c 32 /dev/urandom | base64 >"$D/key"
chmod 600 "$D/key"
bus_port=$((20000 + RANDOM % 20000)) wb_port=$((20000 + RANDOM % 20000))
env -i PATH=/usr/bin:/bin HOME="$D/home" PORT=$bus_port AGENT_EVENT_BUS_DB="$D/bus.db" \
  AGENT_EVENT_BUS_LOG="$D/bus.log" "$bus" >"$D/bus.out" 2>&1 &
sleep 4
env -i PATH=/usr/bin:/bin HOME="$D/home" AGENT_EVENT_BUS_WAKE_DIR="$D/wake" \
  XDG_RUNTIME_DIR="$D/run" XDG_STATE_HOME="$D/state" XDG_CONFIG_HOME="$D/config" \
  WAKEBRIDGE_REGISTRATION__ENABLED=$registration AGENT_EVENT_BUS_URL="http://127.0.0.1:$bus_port/mcp" \
  WAKEBRIDGE_FLEET__KEY_FILE="$D/key" WAKEBRIDGE_FLEET__MACHINE=at-rest \
  WAKEBRIDGE_MUX__TMUX_SOCKET="$D/tmux.sock" "$bin" serve --port "$wb_port" >"$D/wb.log" 2>&1 &
sleep 20
before=$(wc -l <"$D/bus.log")
sleep "$secs"
echo "bus calls in ${secs} s at rest (after the first 20 s):"
tail -n +$((before + 1)) "$D/bus.log" | sed 's/\x1b\[[0-9;]*m//g' |
  grep -oE '(register_session|publish_event|get_events|list_sessions|unregister_session|list_webhooks|register_webhook|unregister_webhook)\(' |
  tr -d '(' | sort | uniq -c
