#!/usr/bin/env bash
# Run inside the nested host of scripts/repack-nested.sh (4 CPUs, NUMA
# nodes 0-1 and 2-3, its own libvirtd), as root, with $1 the shared folder
# holding the pinplan binary. CPU 0 is the host's. Real QEMU guests there:
#
#  pp-a  1 vCPU on CPU 2 (node 1), movable
#  pp-b  shut off, a request of 2 vCPUs on one node: node 0 has 1 free
#        CPU (1), node 1 has 1 (3); it fits only if pp-a moves to CPU 1.
#
# 1. repack --for pp-b --dry-run says that move and changes nothing;
# 2. repack --for pp-b moves pp-a live (its vCPU thread read back on CPU
#    1) and pins pp-b's config onto node 1; pp-b starts there;
# 3. pp-b stopped, apply --rollback of repack's journal puts pp-a back on
#    CPU 2 (live and config) and pp-b's config as it was;
# 4. repack without --for makes the free cores whole: node 1 partly used
#    by pp-a, so pp-a moves to CPU 1 (1 partly used node -> 0); the
#    rollback of its journal puts it back.
# After every step no two running guests have a vCPU thread on one CPU
# (each thread's Cpus_allowed_list in /proc).
set -euo pipefail
S=$1
P=$S/pinplan
URI=qemu:///system
T=$(mktemp -d)
export PINPLAN_STATE_DIR=$T/state
say() { echo "repack-inner: $*"; }
# Guests left running would hold the power-off (libvirt-guests waits for a
# guest OS that is not there to shut down).
cleanup() {
  for n in pp-a pp-b; do
    virsh -q -c $URI destroy "$n" >/dev/null 2>&1 || true
    virsh -q -c $URI undefine "$n" >/dev/null 2>&1 || true
  done
  rm -rf "$T"
}
trap cleanup EXIT
. "$S/guests.sh"
fail() { echo "repack-inner: FAILED: $*"; exit 1; }

systemctl start virtlogd.socket libvirtd.socket libvirtd.service >/dev/null 2>&1 || true
for _ in $(seq 50); do virsh -q -c $URI version >/dev/null 2>&1 && break; sleep 0.2; done
say "host: $(nproc) CPUs; $(virsh -q -c $URI capabilities | grep -o "<cpus num='[0-9]*'>" | tr '\n' ' ')"
$P topology --connect $URI | sed 's/^/  /'

cat >"$T/host.toml" <<'EOF'
[host]
reserved_cpus = "0"
EOF

# A diskless TCG guest: $1 name, $2 its vCPU pins (none: unpinned), $3 its request.
define() {
  local pins="" vcpus=1
  [ -n "$2" ] && pins="<cputune><vcpupin vcpu='0' cpuset='$2'/><emulatorpin cpuset='0'/></cputune>"
  case $3 in *vcpus=\'2\'*) vcpus=2 ;; esac
  define_guest "$1" qemu "$vcpus" "$pins" "$3"
}

# The CPUs of NAME's vCPU threads, sorted, comma-separated.
threads_of() { vcpu_cpus | awk -v n="$1" '$1 == n {print $2}' | sort -n | paste -sd, -; }
config_pin() { virsh -q -c $URI vcpupin "$1" --config | awk '{print $2}' | paste -sd, -; }

define pp-a 2 "vcpus='1' movable='true'"
define pp-b "" "vcpus='2' numa='strict'"
virsh -q -c $URI start pp-a >/dev/null
no_sharing "before"
[ "$(threads_of pp-a)" = 2 ] || fail "pp-a should run on CPU 2, runs on $(threads_of pp-a)"

# 1. The dry run: the move named, nothing changed.
out=$($P repack --connect $URI --spec "$T/host.toml" --for pp-b --dry-run)
echo "$out" | sed 's/^/  /'
echo "$out" | grep -q "would move pp-a vCPU 0: CPUs 2 -> 1" || fail "the dry run should move pp-a from 2 to 1"
[ "$(threads_of pp-a)" = 2 ] || fail "the dry run moved pp-a"

# 2. The move, live; pp-b fits on node 1 and starts there.
t0=$(date +%s%N)
out=$($P repack --connect $URI --spec "$T/host.toml" --for pp-b)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "$out" | sed 's/^/  /'
journal=$(echo "$out" | sed -n 's/^journal: \([^ ]*\) .*/\1/p')
[ -f "$journal" ] || fail "repack named no journal"
[ "$(threads_of pp-a)" = 1 ] || fail "pp-a's vCPU thread should be on CPU 1 now, is on $(threads_of pp-a)"
[ "$(config_pin pp-a)" = 1 ] || fail "pp-a's config should pin CPU 1, pins $(config_pin pp-a)"
[ "$(config_pin pp-b | tr ',' '\n' | sort -n | paste -sd, -)" = "2,3" ] ||
  fail "pp-b's config should pin CPUs 2 and 3, pins $(config_pin pp-b)"
say "repack --for pp-b: pp-a moved 2 -> 1 live (thread read back on CPU 1), pp-b's config pinned to 2-3, in $ms ms"
no_sharing "after repack"
virsh -q -c $URI start pp-b >/dev/null || fail "pp-b did not start after the repack"
[ "$(threads_of pp-b)" = "2,3" ] || fail "pp-b's vCPU threads should be on 2,3, are on $(threads_of pp-b)"
say "pp-b started: its vCPU threads on CPUs $(threads_of pp-b)"
no_sharing "pp-b running"

# 3. Everything back, from repack's journal.
virsh -q -c $URI destroy pp-b >/dev/null
$P apply --rollback "$journal" --connect $URI | sed 's/^/  /'
[ "$(threads_of pp-a)" = 2 ] || fail "the rollback should put pp-a back on CPU 2, it is on $(threads_of pp-a)"
[ "$(config_pin pp-a)" = 2 ] || fail "the rollback should put pp-a's config back on CPU 2, it pins $(config_pin pp-a)"
[ -z "$(virsh -q -c $URI dumpxml pp-b --inactive | grep vcpupin)" ] ||
  fail "the rollback should leave pp-b's config unpinned, it has $(virsh -q -c $URI dumpxml pp-b --inactive | grep vcpupin)"
say "apply --rollback: pp-a back on CPU 2 (live and config), pp-b's config unpinned as it was"
no_sharing "after the rollback"

# 4. Without --for: the free cores made whole.
out=$($P repack --connect $URI --spec "$T/host.toml")
echo "$out" | sed 's/^/  /'
echo "$out" | grep -q "moved pp-a vCPU 0: CPUs 2 -> 1" || fail "repack without --for should move pp-a from 2 to 1"
echo "$out" | grep -q "1 partly used NUMA node.* -> 0" || fail "repack without --for should leave no partly used node"
[ "$(threads_of pp-a)" = 1 ] || fail "pp-a's vCPU thread should be on CPU 1 now, is on $(threads_of pp-a)"
journal=$(echo "$out" | sed -n 's/^journal: \([^ ]*\) .*/\1/p')
[ -f "$journal" ] || fail "repack without --for named no journal"
no_sharing "after repack without --for"
$P apply --rollback "$journal" --connect $URI >/dev/null
[ "$(threads_of pp-a)" = 2 ] || fail "the rollback should put pp-a back on CPU 2, it is on $(threads_of pp-a)"
say "repack without --for: pp-a moved 2 -> 1 live, node 1 whole; rolled back"
say "passed"
