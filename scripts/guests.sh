# Sourced by scripts/watch-live.sh and scripts/repack-inner.sh: a tiny
# diskless guest defined, what the running guests' vCPU threads may run on,
# read from /proc, and the check that no two guests share a CPU. The caller
# sets URI and T (a private directory) and defines say and fail.

# Defines guest $1 (domain type $2: kvm or qemu) with $3 vCPUs, the
# <cputune> $4 (may be empty) and the pinplan request attributes $5.
define_guest() {
  cat >"$T/$1.xml" <<EOF
<domain type='$2'>
  <name>$1</name>
  <memory unit='MiB'>64</memory>
  <vcpu placement='static'>$3</vcpu>
  $4
  <metadata><pinplan:vm xmlns:pinplan='urn:pinplan:vm:1' $5/></metadata>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <on_poweroff>destroy</on_poweroff>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator><controller type='usb' model='none'/><memballoon model='none'/></devices>
</domain>
EOF
  virsh -q -c "$URI" define "$T/$1.xml" >/dev/null
}

# "NAME CPUS" per vCPU thread of each running guest, from /proc.
vcpu_cpus() {
  local n pid task
  for n in $(virsh -q -c $URI list --name); do
    # A guest that stopped during the scan has no pid file: skip it.
    pid=$(cat "/run/libvirt/qemu/$n.pid" 2>/dev/null) || continue
    for task in /proc/"$pid"/task/*; do
      if grep -q '^CPU [0-9]*/' "$task/comm" 2>/dev/null; then
        echo "$n $(awk '/Cpus_allowed_list/ {print $2}' "$task/status")"
      fi
    done
  done | sort
}

# Fails ($1 names the step) when a vCPU thread may run on more than one CPU
# or two guests have vCPU threads on one CPU.
no_sharing() {
  local name cpus seen=" "
  while read -r name cpus; do
    [ -n "$name" ] || continue
    case $cpus in *-* | *,*) fail "$1: a vCPU thread of $name may run on $cpus (not one CPU)" ;; esac
    case $seen in
      *" $cpus:$name "*) ;;
      *" $cpus:"*) fail "$1: CPU $cpus has two guests' vCPU threads ($(vcpu_cpus | tr '\n' ';'))" ;;
    esac
    seen="$seen$cpus:$name "
  done < <(vcpu_cpus)
  say "$1: no two running guests share a CPU ($(vcpu_cpus | tr '\n' ';'))"
}
