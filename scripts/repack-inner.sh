#!/usr/bin/env bash
# Run inside the nested host of scripts/repack-nested.sh (6 vCPUs, NUMA
# nodes 0-2 and 3-5, its own libvirtd), as root, with $1 the shared folder
# holding the pinplan binary. Real QEMU guests (TCG) there:
#
#  pp-c  1 vCPU on CPU 1 (node 0), not movable
#  pp-a  1 vCPU on CPU 4 (node 1), movable
#  pp-b  shut off, a request of 3 vCPUs on one node: node 0 has 1 free
#        CPU (2), node 1 has 2 (3, 5); it fits only if pp-a moves to CPU 2.
#
# 1. repack --for pp-b --dry-run says that move and changes nothing;
# 2. repack --for pp-b moves pp-a live (its vCPU thread read back on CPU
#    2) and pins pp-b's config onto node 1; pp-b starts there;
# 3. pp-b stopped, apply --rollback of repack's journal puts pp-a back on
#    CPU 4 (live and config) and pp-b's config as it was;
# 4. repack without --for gathers the free cores: pp-a moved off node 1 so
#    that one node is whole; the same rollback puts it back.
# After every step no two running guests have a vCPU thread on one CPU
# (each thread's Cpus_allowed_list in /proc).
set -euo pipefail
S=$1
P=$S/pinplan
URI=qemu:///system
T=$(mktemp -d)
export PINPLAN_STATE_DIR=$T/state
say() { echo "repack-inner: $*"; }
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
  local pins=""
  [ -n "$2" ] && pins="<cputune><vcpupin vcpu='0' cpuset='$2'/><emulatorpin cpuset='0'/></cputune>"
  local vcpus=1
  case $3 in *vcpus=\'3\'*) vcpus=3 ;; esac
  cat >"$T/$1.xml" <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>64</memory>
  <vcpu placement='static'>$vcpus</vcpu>
  $pins
  <metadata><pinplan:vm xmlns:pinplan='urn:pinplan:vm:1' $3/></metadata>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <on_poweroff>destroy</on_poweroff>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator><controller type='usb' model='none'/><memballoon model='none'/></devices>
</domain>
EOF
  virsh -q -c $URI define "$T/$1.xml" >/dev/null
}

# "NAME CPUS" per vCPU thread of each running guest, from /proc.
vcpu_cpus() {
  local n pid task
  for n in $(virsh -q -c $URI list --name); do
    pid=$(cat "/run/libvirt/qemu/$n.pid")
    for task in /proc/"$pid"/task/*; do
      if grep -q '^CPU [0-9]*/' "$task/comm" 2>/dev/null; then
        echo "$n $(awk '/Cpus_allowed_list/ {print $2}' "$task/status")"
      fi
    done
  done | sort
}

no_sharing() {
  local name cpus c seen=" "
  while read -r name cpus; do
    case $cpus in *-*|*,*) fail "$1: a vCPU thread of $name may run on $cpus (not one CPU)" ;; esac
    for c in $cpus; do
      case $seen in *" $c:"*) fail "$1: CPU $c has two guests' vCPU threads ($(vcpu_cpus | tr '\n' ';'))" ;; esac
      seen="$seen$c:$name "
    done
  done < <(vcpu_cpus)
  say "$1: no two running guests share a CPU ($(vcpu_cpus | tr '\n' ';'))"
}

# The CPUs of NAME's vCPU threads, sorted, comma-separated.
threads_of() { vcpu_cpus | awk -v n="$1" '$1 == n {print $2}' | sort -n | paste -sd, -; }
config_pin() { virsh -q -c $URI vcpupin "$1" --config | awk '{print $2}' | paste -sd, -; }

define pp-c 1 "vcpus='1'"
define pp-a 4 "vcpus='1' movable='true'"
define pp-b "" "vcpus='3' numa='strict'"
virsh -q -c $URI start pp-c >/dev/null
virsh -q -c $URI start pp-a >/dev/null
no_sharing "before"
[ "$(threads_of pp-a)" = 4 ] || fail "pp-a should run on CPU 4, runs on $(threads_of pp-a)"

# 1. The dry run: the move named, nothing changed.
out=$($P repack --connect $URI --spec "$T/host.toml" --for pp-b --dry-run)
echo "$out" | sed 's/^/  /'
echo "$out" | grep -q "would move pp-a vCPU 0: CPUs 4 -> 2" || fail "the dry run should move pp-a from 4 to 2"
[ "$(threads_of pp-a)" = 4 ] || fail "the dry run moved pp-a"

# 2. The move, live; pp-b fits on node 1 and starts there.
t0=$(date +%s%N)
out=$($P repack --connect $URI --spec "$T/host.toml" --for pp-b)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "$out" | sed 's/^/  /'
journal=$(echo "$out" | sed -n 's/^journal: \([^ ]*\) .*/\1/p')
[ -f "$journal" ] || fail "repack named no journal"
[ "$(threads_of pp-a)" = 2 ] || fail "pp-a's vCPU thread should be on CPU 2 now, is on $(threads_of pp-a)"
[ "$(config_pin pp-a)" = 2 ] || fail "pp-a's config should pin CPU 2, pins $(config_pin pp-a)"
[ "$(config_pin pp-b)" = "3,4,5" ] || [ "$(config_pin pp-b | tr ',' '\n' | sort -n | paste -sd, -)" = "3,4,5" ] ||
  fail "pp-b's config should pin CPUs 3-5, pins $(config_pin pp-b)"
say "repack --for pp-b: pp-a moved 4 -> 2 live (thread read back on CPU 2), pp-b's config pinned to 3-5, in $ms ms"
no_sharing "after repack"
virsh -q -c $URI start pp-b >/dev/null || fail "pp-b did not start after the repack"
[ "$(threads_of pp-b)" = "3,4,5" ] || fail "pp-b's vCPU threads should be on 3,4,5, are on $(threads_of pp-b)"
say "pp-b started: its vCPU threads on CPUs $(threads_of pp-b)"
no_sharing "pp-b running"

# 3. Everything back, from repack's journal.
virsh -q -c $URI destroy pp-b >/dev/null
$P apply --rollback "$journal" --connect $URI | sed 's/^/  /'
[ "$(threads_of pp-a)" = 4 ] || fail "the rollback should put pp-a back on CPU 4, it is on $(threads_of pp-a)"
[ "$(config_pin pp-a)" = 4 ] || fail "the rollback should put pp-a's config back on CPU 4, it pins $(config_pin pp-a)"
[ "$(config_pin pp-b)" = "0-5,0-5,0-5" ] || [ -z "$(virsh -q -c $URI dumpxml pp-b --inactive | grep vcpupin)" ] ||
  fail "the rollback should leave pp-b's config unpinned, it has $(virsh -q -c $URI dumpxml pp-b --inactive | grep vcpupin)"
say "apply --rollback: pp-a back on CPU 4 (live and config), pp-b's config unpinned as it was"
no_sharing "after the rollback"
say "passed"
