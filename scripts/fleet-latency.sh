#!/usr/bin/env bash
# How long a change on one machine takes to show in another's `/fleet`: the real
# agent-event-bus ($WB_TEST_BUS, default the venv of VENDORED.md) and two daemons of <binary>
# (machines a and b, private dirs, one fleet key), one session on b made known by its hook;
# then <changes> times in turn: pause or unpause it on b, and read a's /fleet every 100 ms
# until it shows, then wait <quiet> seconds. Prints each latency and the p50 and max, in
# seconds. With no quiet, each change follows the last status within the 15 s gap and waits
# it out; with 20 s of quiet, it goes at once. With `command`, the change is a's instead:
# `wakebridge pause|unpause <session> --machine b` on a, timed until it returns with b's answer
# (b's webhook registered on the bus), and b's /sessions is checked to show it then.
#
#   scripts/fleet-latency.sh <wakebridge binary> [changes, default 10] [quiet, default 0] [status|command]
set -euo pipefail
bin=$(realpath "$1") changes=${2:-10} quiet=${3:-0} how=${4:-status}
registration=$([ "$how" = command ] && echo true || echo false)
bus=${WB_TEST_BUS:-/tmp/aeb-venv/bin/agent-event-bus}
D=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"' EXIT
head -c 32 /dev/urandom | base64 >"$D/key"
chmod 600 "$D/key"
bus_port=$((20000 + RANDOM % 20000))
mkdir -p "$D/bus-home"
env -i PATH=/usr/bin:/bin HOME="$D/bus-home" PORT=$bus_port AGENT_EVENT_BUS_DB="$D/bus.db" \
  AGENT_EVENT_BUS_LOG="$D/bus.log" "$bus" >"$D/bus.out" 2>&1 &
sleep 4
machine_env() { # machine -> env assignments
  local m=$1
  echo PATH=/usr/bin:/bin HOME="$D/$m/home" AGENT_EVENT_BUS_WAKE_DIR="$D/$m/wake" \
    XDG_RUNTIME_DIR="$D/$m/run" XDG_STATE_HOME="$D/$m/state" XDG_CONFIG_HOME="$D/$m/config" \
    WAKEBRIDGE_REGISTRATION__ENABLED=$registration AGENT_EVENT_BUS_BRIDGE_BACKEND=spool \
    AGENT_EVENT_BUS_URL="http://127.0.0.1:$bus_port/mcp" WAKEBRIDGE_FLEET__KEY_FILE="$D/key" \
    WAKEBRIDGE_FLEET__MACHINE="$m"
}
declare -A port
for m in a b; do
  mkdir -p "$D/$m/home" "$D/$m/run"
  chmod 700 "$D/$m/run"
  port[$m]=$((20000 + RANDOM % 20000))
  # shellcheck disable=SC2046
  env -i $(machine_env "$m") "$bin" serve --port "${port[$m]}" >"$D/$m.log" 2>&1 &
done
sleep 3
sid=fleet-latency-session
# shellcheck disable=SC2046
echo "{\"session_id\":\"$sid\",\"hook_event_name\":\"SessionStart\",\"source\":\"startup\",\"cwd\":\"/work/p\"}" |
  env -i $(machine_env b) "$bin" hook >/dev/null
shows() { # jq-free: whether a's /fleet shows b's session with (1) or without (0) a pause
  local body
  body=$(curl -sf "http://127.0.0.1:${port[a]}/fleet") || return 1
  python3 -c 'import json,sys
f=json.loads(sys.argv[1]); want=sys.argv[2]=="1"
for m in f["machines"]:
    if m["name"]=="b" and m["status"]:
        for s in m["status"]["sessions"]:
            if s["id"]==sys.argv[3]: sys.exit(0 if ("paused" in s)==want else 1)
sys.exit(1)' "$body" "$1" "$sid"
}
until shows 0; do sleep 0.5; done
took=()
for i in $(seq 1 "$changes"); do
  verb=$([ $((i % 2)) = 1 ] && echo pause || echo unpause)
  want=$([ "$verb" = pause ] && echo 1 || echo 0)
  start=$(date +%s.%N)
  if [ "$how" = command ]; then
    # shellcheck disable=SC2046
    env -i $(machine_env a) "$bin" "$verb" "$sid" --machine b --url "http://127.0.0.1:${port[a]}" >/dev/null
    t=$(echo "$(date +%s.%N) - $start" | bc)
    paused=$(curl -sf "http://127.0.0.1:${port[b]}/sessions" | python3 -c 'import json,sys
print(int(any(s["session_id"]==sys.argv[1] and s.get("pause") for s in json.load(sys.stdin)["sessions"])))' "$sid")
    [ "$paused" = "$want" ] || { echo "b's /sessions does not show the $verb after the answer" >&2; exit 1; }
  else
    curl -sf -X POST -H 'content-type: application/json' -d "{\"session_ids\":[\"$sid\"]}" \
      "http://127.0.0.1:${port[b]}/$verb" >/dev/null
    until shows "$want"; do sleep 0.1; done
    t=$(echo "$(date +%s.%N) - $start" | bc)
  fi
  took+=("$t")
  printf '%2d %-7s %6.2f s\n' "$i" "$verb" "$t"
  sleep "$quiet"
done
printf '%s\n' "${took[@]}" | sort -n | awk '{a[NR]=$1} END {printf "p50 %.2f s, max %.2f s over %d changes\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), a[NR], NR}'
