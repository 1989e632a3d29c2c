#!/usr/bin/env bash
# pinplan watch on the real libvirtd with real guests (issue 30), run by
# scripts/test.sh after the test binaries (it restarts libvirtd, which no
# test running beside it may see). On this host's 2 CPUs, CPU 0 reserved:
#
#  1. the watcher runs with its admission hook installed in libvirt's hooks;
#  2. a tagged domain defined is pinned in its config, starts pinned: its
#     vCPU threads' affinity read back right after the start, and the time
#     from the start event (the watcher's line) to that read-back reported;
#  3. a second tagged domain defined while the first runs does not fit; the
#     first stopped, the second's start is refused once (unpinned, it would
#     float onto the host's CPU) and its config pinned by the watcher; it
#     starts pinned;
#  4. a third, started while the second runs, is refused by the hook with
#     pinplan's explanation in virsh's error; once the second is stopped
#     (a core freed), it is refused once more, pinned, and starts pinned;
#     then a and b started at the same moment, beside a decision: both
#     refused by the hook (their configs pin c's CPU), none let through;
#  5. libvirtd restarted under the watcher: it says the connection closed,
#     reconnects and reconciles; a vCPU pinned by hand onto the host's CPU
#     is pinned back; then the watcher killed with SIGKILL, the vCPU moved
#     onto the host's CPU again and a tagged domain defined meanwhile, the
#     watcher started again: its reconcile repairs the first and says the
#     second has no room;
#  6. after every step: no two running domains have a vCPU thread on one
#     CPU, read from /proc (each vCPU thread's Cpus_allowed_list).
#
# Usage: scripts/watch-live.sh PINPLAN-BINARY. Exits non-zero on a failure.
set -euo pipefail
PINPLAN=$(realpath "$1")
URI=qemu:///system
HOOKS=/etc/libvirt/hooks
T=$(mktemp -d)
export PINPLAN_STATE_DIR=$T/state
WATCHER=
NAMES=(pp-watch-a pp-watch-b pp-watch-c pp-watch-d)

fail() { echo "watch-live: FAILED: $*" >&2; echo "--- watcher log:" >&2; cat "$T/watch.log" >&2 || true; exit 1; }
say() { echo "watch-live: $*"; }

libvirtd_pid() { cat /run/libvirtd.pid; }
hup_libvirtd() { kill -HUP "$(libvirtd_pid)"; sleep 1; }

cleanup() {
  [ -n "$WATCHER" ] && kill "$WATCHER" 2>/dev/null || true
  for n in "${NAMES[@]}"; do
    virsh -q -c $URI destroy "$n" >/dev/null 2>&1 || true
    virsh -q -c $URI undefine "$n" >/dev/null 2>&1 || true
  done
  if [ -f "$HOOKS/qemu.d/pinplan-admit" ] && grep -q "$T" "$HOOKS/qemu.d/pinplan-admit"; then
    rm -f "$HOOKS/qemu.d/pinplan-admit"
    rmdir "$HOOKS/qemu.d" 2>/dev/null || true
    [ -n "${MADE_HOOKS:-}" ] && rmdir "$HOOKS" 2>/dev/null
    hup_libvirtd || true
  fi
  rm -rf "$T"
}
trap cleanup EXIT

kind=qemu
if virsh -q -c $URI capabilities | grep -q "<domain type='kvm'" && [ -w /dev/kvm ]; then kind=kvm; fi

. "$(dirname "$0")/guests.sh"

# A tiny diskless guest with a request of 1 vCPU in its metadata.
define() { define_guest "$1" "$kind" 1 "" "vcpus='1'"; }

# Waits (10 s at most) for a watcher line whose message matches $1 (an ERE
# anchored at the message's start); prints the JSON line.
wait_line() {
  local line
  for _ in $(seq 100); do
    line=$(grep -E "\"message\":\"$1" "$T/watch.log" | tail -1 || true)
    [ -n "$line" ] && { echo "$line"; return 0; }
    sleep 0.1
  done
  fail "no watcher line matching /$1/"
}

# "start event at T, decided and pinned in M ms; read back N ms after the
# event": from the watcher's JSON line ($1: time = when the decision ended,
# millis = how long it took) and the read-back's time ($2).
report_times() {
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.loads(sys.argv[1]); back = float(sys.argv[2])
event = d["time"] - d["millis"] / 1000
print(f"{d['message']} -- event handled at {event:.3f}, decision done {d['millis']:.0f} ms later; "
      f"vCPU thread affinity read back {1000 * (back - event):.0f} ms after the event")
PY
}

start_watcher() {
  "$PINPLAN" watch --connect $URI "$T/host.toml" --socket "$T/watch.sock" --format json >>"$T/watch.log" 2>&1 &
  WATCHER=$!
  wait_line "watching " >/dev/null
}

printf '[host]\nreserved_cpus = "0"\n' >"$T/host.toml"
[ -d "$HOOKS" ] || { mkdir -p "$HOOKS"; MADE_HOOKS=1; }
"$PINPLAN" watch --emit hook "$HOOKS" --socket "$T/watch.sock" >/dev/null
hup_libvirtd
start_watcher

# 2. Defined: pinned in its config; started: pinned from its first instant.
define pp-watch-a
wait_line "pp-watch-a defined: vCPUs 1, emulator 0 .*pinned in its config" >/dev/null
[ "$(virsh -q -c $URI vcpupin pp-watch-a --config | awk '{print $2}')" = 1 ] || fail "pp-watch-a's config is not pinned to CPU 1"
virsh -q -c $URI start pp-watch-a >/dev/null
readback=$(date +%s.%N)
threads=$(vcpu_cpus)
[ "$threads" = "pp-watch-a 1" ] || fail "pp-watch-a's vCPU threads: $threads"
line=$(wait_line "pp-watch-a started: ")
say "pp-watch-a: $(report_times "$line" "$readback") (its pins were in its config before the start)"
no_sharing "a started"

# 3. b defined while a runs: no room. a stopped, b started: b is not pinned,
# so its vCPUs would float onto the host's CPU: refused, its config pinned
# by the watcher; started again, it starts pinned.
define pp-watch-b
wait_line "pp-watch-b defined: not pinned" >/dev/null
virsh -q -c $URI destroy pp-watch-a >/dev/null
wait_line "pp-watch-a stopped: CPUs 1 free" >/dev/null
if virsh -q -c $URI start pp-watch-b 2>"$T/b.err"; then fail "pp-watch-b started unpinned"; fi
grep -q "pinplan watch pins its config onto free cores now: start pp-watch-b again" "$T/b.err" || fail "pp-watch-b's refusal: $(cat "$T/b.err")"
wait_line "pp-watch-b admission: vCPUs 1, emulator 0 .*pinned in its config" >/dev/null
virsh -q -c $URI start pp-watch-b >/dev/null
readback=$(date +%s.%N)
[ "$(vcpu_cpus)" = "pp-watch-b 1" ] || fail "pp-watch-b's vCPU threads: $(vcpu_cpus)"
line=$(wait_line "pp-watch-b started: ")
say "pp-watch-b: refused once unpinned, its config pinned; then $(report_times "$line" "$readback")"
no_sharing "b started"

# 4. c refused while b runs, with pinplan's words in virsh's error (no plan
# fits it now: no config is pinned).
define pp-watch-c
if virsh -q -c $URI start pp-watch-c 2>"$T/c.err"; then fail "pp-watch-c started beside pp-watch-b"; fi
grep -q "pinplan: pp-watch-c may not start" "$T/c.err" || fail "virsh's error lacks pinplan's: $(cat "$T/c.err")"
say "pp-watch-c refused: $(tr '\n' ' ' <"$T/c.err")"
no_sharing "c refused"
virsh -q -c $URI destroy pp-watch-b >/dev/null
wait_line "pp-watch-b stopped: " >/dev/null
# Unpinned (no room when it was defined), c is refused once and pinned.
if virsh -q -c $URI start pp-watch-c 2>"$T/c2.err"; then fail "pp-watch-c started unpinned"; fi
grep -q "start pp-watch-c again" "$T/c2.err" || fail "pp-watch-c's second refusal: $(cat "$T/c2.err")"
wait_line "pp-watch-c admission: vCPUs 1, emulator 0 .*pinned in its config" >/dev/null
virsh -q -c $URI start pp-watch-c >/dev/null
wait_line "pp-watch-c started: vCPUs 1" >/dev/null
[ "$(vcpu_cpus)" = "pp-watch-c 1" ] || fail "pp-watch-c's vCPU threads: $(vcpu_cpus)"
no_sharing "c started once a core was freed"

# Two starts at the same moment, while a decision reads the host (c's pin
# set again live raises libvirt's tunable event): each hook is answered on
# the watcher's admission thread from its last reading, not after that
# decision — which waits on libvirt, which holds its calls while a domain is
# in its prepare hook. A hook that waited out its 5 s would let the start
# through: a and b (vCPU pinned to CPU 1, emulator to 0, in their configs)
# must be refused.
t0=$(date +%s%N)
virsh -q -c $URI vcpupin pp-watch-c 0 1 --live >/dev/null &
pc=$!
virsh -q -c $URI start pp-watch-a 2>"$T/a2.err" >/dev/null &
pa=$!
virsh -q -c $URI start pp-watch-b 2>"$T/b2.err" >/dev/null &
pb=$!
wait $pa && fail "pp-watch-a started beside pp-watch-c"
wait $pb && fail "pp-watch-b started beside pp-watch-c"
wait $pc || true
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
for n in a b; do
  grep -q "pinplan: pp-watch-$n may not start: its pins 0-1 take core 1 of pp-watch-c" "$T/${n}2.err" ||
    fail "pp-watch-$n's refusal at a simultaneous start: $(cat "$T/${n}2.err")"
done
say "pp-watch-a and pp-watch-b started at the same moment, beside a decision: both refused by the hook with pinplan's reason, in $ms ms"
# When each was decided (the watcher's clock: end time, and how long): the
# admission answers need not wait for the change decision.
for m in "pp-watch-c changed" "pp-watch-a admission" "pp-watch-b admission"; do
  grep -E "\"message\":\"$m" "$T/watch.log" | tail -1 | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    print("watch-live:   %s... ended %.3f, took %.0f ms" % (d["message"][:60], d["time"], d["millis"]))' || true
done
no_sharing "two simultaneous starts refused"

# 5. libvirtd restarted under the watcher.
kill "$(libvirtd_pid)"
for _ in $(seq 50); do virsh -q -c $URI version >/dev/null 2>&1 || break; sleep 0.1; done
libvirtd -d
for _ in $(seq 100); do virsh -q -c $URI version >/dev/null 2>&1 && break; sleep 0.2; done
wait_line "connection to qemu:///system closed: reconnecting" >/dev/null
wait_line "pp-watch-c reconciled: " >/dev/null
say "libvirtd restarted: the watcher reconnected and reconciled: $(grep -c reconciled "$T/watch.log") reconcile lines so far"
no_sharing "after libvirtd's restart"

# A vCPU pinned by hand onto the host's reserved CPU: the watcher hears it
# (libvirt's tunable event) and pins it back, live.
virsh -q -c $URI vcpupin pp-watch-c 0 0 --live >/dev/null
# Read back every 5 ms until the vCPU thread is on CPU 1 again (5 s at most).
for _ in $(seq 1000); do [ "$(vcpu_cpus)" = "pp-watch-c 1" ] && break; sleep 0.005; done
after=$(date +%s.%N)
[ "$(vcpu_cpus)" = "pp-watch-c 1" ] || fail "pp-watch-c was not pinned back: $(vcpu_cpus)"
line=$(wait_line "pp-watch-c changed: vCPUs 1, emulator 0 .*pinned live")
say "pp-watch-c pinned by hand onto CPU 0 (the host's): $(report_times "$line" "$after") (pinned back live)"

# The watcher killed; meanwhile pp-watch-c pinned onto the host's CPU again
# and a tagged domain defined; started again: the reconcile repairs c and
# says d has no room.
kill -KILL "$WATCHER"
wait "$WATCHER" 2>/dev/null || true
virsh -q -c $URI vcpupin pp-watch-c 0 0 --live >/dev/null
define pp-watch-d
start_watcher
wait_line "pp-watch-c reconciled: vCPUs 1, emulator 0 .*pinned live" >/dev/null
wait_line "pp-watch-d reconciled: not pinned" >/dev/null
[ "$(vcpu_cpus)" = "pp-watch-c 1" ] || fail "pp-watch-c was not repaired: $(vcpu_cpus)"
say "the watcher killed and started again: pp-watch-c, moved onto the host's CPU meanwhile, repaired by the reconcile; pp-watch-d, defined meanwhile, has no room while c runs"
no_sharing "after the watcher's restart"
virsh -q -c $URI destroy pp-watch-c >/dev/null
wait_line "pp-watch-c stopped: " >/dev/null

kill -TERM "$WATCHER"
wait "$WATCHER" || fail "the watcher did not end cleanly on SIGTERM"
WATCHER=
[ ! -e "$T/watch.sock" ] || fail "the admission socket was left behind"

# 7. --undo: every pin the watcher set, back as it was (none: the guests
# were defined without pins), from its journals, the latest first.
"$PINPLAN" watch --undo --connect $URI --dry-run >"$T/undo-dry.txt"
grep -q "dry run: nothing was changed" "$T/undo-dry.txt" || fail "watch --undo --dry-run: $(cat "$T/undo-dry.txt")"
[ "$(virsh -q -c $URI vcpupin pp-watch-a --config | awk '{print $2}')" = 1 ] || fail "--dry-run changed pp-watch-a"
"$PINPLAN" watch --undo --connect $URI >"$T/undo.txt"
say "watch --undo: $(grep -c 'rolled back' "$T/undo.txt") journals rolled back"
for n in pp-watch-a pp-watch-b pp-watch-c pp-watch-d; do
  pins=$(virsh -q -c $URI vcpupin "$n" --config | awk '{print $2}')
  [ "$pins" = 0-1 ] || fail "after --undo, $n's config still pins vCPU 0 to $pins: $(cat "$T/undo.txt")"
done
"$PINPLAN" watch --undo --connect $URI | grep -q "nothing to undo" || fail "a second --undo found journals left"
say "passed"
