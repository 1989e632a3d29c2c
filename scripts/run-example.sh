#!/usr/bin/env bash
# README command 1: install what is missing, build, and run pinplan on the
# bundled lab example. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_cargo
apt_install "${BUILD_PACKAGES[@]}"
need_hwloc
cargo build --locked -q -p cli
"$CARGO_TARGET_DIR/debug/pinplan" topology --source examples/lab/b1-host.xml
echo
"$CARGO_TARGET_DIR/debug/pinplan" demand --table examples/lab/b1-tx-cores.csv --profile vm-64b --target 100 --min-fraction 0.97
"$CARGO_TARGET_DIR/debug/pinplan" demand --table examples/lab/b1-tx-cores.csv --profile vm-512b --target 100
