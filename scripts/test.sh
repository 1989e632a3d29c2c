#!/usr/bin/env bash
# README command 2: install what the tests need (build packages, a real
# libvirtd with QEMU, libvirt's XML validator), start libvirtd, then run the
# whole suite: formatting, clippy, unit, property and integration tests
# (including the ones against the live libvirtd). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
. scripts/libvirt-up.sh
. scripts/sshd-up.sh
need_cargo
# bzip2: tests/doctor_cli.rs unpacks an hwloc sysfs capture (.tar.bz2).
# hwloc: lstopo for the live topology tests; bzip2: the doctor fixtures;
# librsvg2-bin: rsvg-convert renders report --format svg to PNG.
apt_install "${BUILD_PACKAGES[@]}" hwloc bzip2 librsvg2-bin procps systemd
need_hwloc
libvirt_up
trap 'sshd_down; libvirt_down' EXIT
# The fleet tests reach this libvirtd through qemu+ssh:// as well.
sshd_up

# Tests that need libvirt read this; they fail (never skip) when it is set.
export PINPLAN_TEST_LIBVIRT_URI=qemu:///system
# A missing or changed snapshot (tests/snapshots/) fails and writes nothing.
export INSTA_UPDATE=no

cargo fmt --all -- --check
# The API docs build without a warning (broken links, private links).
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --workspace -q
cargo clippy --locked --all-targets -q -- -D warnings
# The tests run with apply's fault-injection hook built in (off by default).
cargo clippy --locked --all-targets -q --features pinplan-cli/fault-injection -- -D warnings
cargo test --locked --workspace --features pinplan-cli/fault-injection
# pinplan watch (issue 30): its decisions on libvirt's test driver, 300
# random domain events with no shared core after any (the bench program, in
# the test profile); then the service on the real libvirtd with real guests
# and its hook, which restarts libvirtd (so it runs after every test).
PINPLAN_WATCH_EVENTS=300 cargo test --locked -q -p pinplan --bench watch
scripts/watch-live.sh "$CARGO_TARGET_DIR/debug/pinplan"
# repack on real guests of a 4-CPU host: a QEMU machine with its own
# libvirtd (its root file system built once, then cached), since a move
# can never make room on a 2-CPU machine.
scripts/repack-nested.sh "$CARGO_TARGET_DIR/debug/pinplan"
