#!/usr/bin/env bash
# README command 1: install what is missing, build, and run pinplan on the
# bundled lab example. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_cargo
apt_install "${BUILD_PACKAGES[@]}"
need_hwloc
cargo build --locked -q -p pinplan-cli
"$CARGO_TARGET_DIR/debug/pinplan" plan examples/lab/b1.toml
