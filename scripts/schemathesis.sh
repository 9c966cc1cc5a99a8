#!/usr/bin/env bash
# API conformance: runs schemathesis (PyPI) against a freshly started daemon using openapi.yaml.
# Usage: scripts/schemathesis.sh [extra schemathesis args]
# Installs schemathesis with pip when missing. Starts the release binary on a free loopback port
# with a private wake dir, ledger and runtime dir, and stops it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v schemathesis >/dev/null || python3 -m pip install -q schemathesis
cargo build --release -q

root=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$root/run"
AGENT_EVENT_BUS_WAKE_DIR="$root/wake" XDG_RUNTIME_DIR="$root/run" XDG_STATE_HOME="$root/state" \
  XDG_CONFIG_HOME="$root/config" WAKEBRIDGE_REGISTRATION__ENABLED=false RUST_LOG=warn \
  target/release/wakebridge serve --backend spool --port "$port" 2>"$root/daemon.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$root"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done

schemathesis run openapi.yaml --url "http://127.0.0.1:$port" \
  --checks all --max-time 120 "$@"
