#!/usr/bin/env bash
# Builds the debugger for the browser (WebAssembly) into OUT, by default target/release/web:
# beside the release `framelog` binary, where `framelog view|serve --http` finds it. Downloads
# nothing but crates: the wasm32 target from rustup, and wasm-bindgen-cli built by cargo at
# exactly the version of the `wasm-bindgen` crate in Cargo.lock (no trunk, no wasm-opt).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-target/release/web}"

rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    echo "build.sh: the wasm32-unknown-unknown target is missing and rustup could not add it" >&2
    exit 1
fi
VERSION="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if [ -z "$VERSION" ]; then
    echo "build.sh: no wasm-bindgen in Cargo.lock" >&2
    exit 1
fi
if ! wasm-bindgen --version 2>/dev/null | grep -q " $VERSION\$"; then
    echo "build.sh: installing wasm-bindgen-cli $VERSION (once)" >&2
    # Not --locked: its lock file names a webpki-roots release the registry no longer offers.
    cargo install --quiet wasm-bindgen-cli --version "$VERSION"
fi

cargo build --release --target wasm32-unknown-unknown -p framelog-debugger --bin debugger-gui
mkdir -p "$OUT"
wasm-bindgen --target web --no-typescript --out-dir "$OUT" --out-name debugger \
    target/wasm32-unknown-unknown/release/debugger-gui.wasm
cp debugger-gui/web/index.html "$OUT/"
echo "built the browser viewer into $OUT ($(du -sh "$OUT" | cut -f1))"
