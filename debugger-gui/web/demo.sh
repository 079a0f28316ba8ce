#!/usr/bin/env bash
# Builds the browser viewer and `framelog`, records the demo workload into a fresh log, and
# serves it: open the printed http://127.0.0.1:PORT/ in a browser to follow it live.
# Usage: debugger-gui/web/demo.sh [ADDR] (default 127.0.0.1:8080). Ctrl+C stops both.
set -euo pipefail
cd "$(dirname "$0")/../.."
ADDR="${1:-127.0.0.1:8080}"

debugger-gui/web/build.sh target/release/web
cargo build --release --bin framelog --bin framelog-demo
LOG="$(mktemp -d -t framelog-web-demo.XXXXXX)"
target/release/framelog-demo "$LOG" forever &
DEMO=$!
trap 'kill $DEMO 2>/dev/null || true' EXIT
target/release/framelog view "$LOG" --http "$ADDR" --web target/release/web
