#!/usr/bin/env bash
# Measures `pinplan apply` per VM (live + config pins, read-back included) on
# the local libvirtd: two tiny real guests (2 vCPUs, 64 MiB, no disk; KVM when
# /dev/kvm is there, else TCG) are re-pinned back and forth ROUNDS times with a
# release build, and the per-VM times that apply prints are summarised.
# Results go in docs/benchmarks.md. Usage: scripts/bench-apply.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
. scripts/libvirt-up.sh
need_cargo
apt_install "${BUILD_PACKAGES[@]}"
libvirt_up
rounds=${1:-20}
uri=qemu:///system
cargo build --release --locked -q -p pinplan-cli
bin=$CARGO_TARGET_DIR/release/pinplan
work=$(mktemp -d)
names=(pinplan-bench-a pinplan-bench-b)
cleanup() {
  for n in "${names[@]}"; do virsh -q -c $uri destroy "$n" >/dev/null 2>&1 || true
    virsh -q -c $uri undefine "$n" >/dev/null 2>&1 || true; done
  rm -rf "$work"; libvirt_down
}
trap cleanup EXIT
type=qemu; [ -w /dev/kvm ] && type=kvm
for n in "${names[@]}"; do
  cat > "$work/$n.xml" <<XML
<domain type='$type'><name>$n</name><memory unit='MiB'>64</memory>
<vcpu placement='static'>2</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<controller type='usb' model='none'/><memballoon model='none'/></devices></domain>
XML
  virsh -q -c $uri define "$work/$n.xml" >/dev/null; virsh -q -c $uri start "$n" >/dev/null
done
# A real plan of this host for one VM gives the host, fingerprint and format;
# both guests then get the host's first two CPUs, crossed one way or the other.
printf '[host]\nreserved_cores = 1\n[defaults]\nthreads = "prefer"\n[[vm]]\nname = "%s"\nvcpus = 1\n' \
  "${names[0]}" > "$work/spec.toml"
"$bin" plan "$work/spec.toml" --connect $uri --out "$work/base" >/dev/null
python3 - "$work" "${names[@]}" <<'PY'
import json, sys, copy
work, a, b = sys.argv[1:4]
base = json.load(open(f"{work}/base/plan.json"))
def plan(pa, pb):
    p = copy.deepcopy(base); t = p["vms"][0]; vms = []
    for name, (c0, c1, e) in ((a, pa), (b, pb)):
        v = copy.deepcopy(t); v["name"] = name; v["cpus"] = "0-1"
        v["vcpus"] = [{"vcpu": 0, "cpu": c0}, {"vcpu": 1, "cpu": c1}]
        v["emulator_cpus"] = str(e); vms.append(v)
    p["vms"] = vms; return p
json.dump(plan((1, 0, 1), (0, 1, 0)), open(f"{work}/p1.json", "w"))
json.dump(plan((0, 1, 0), (1, 0, 1)), open(f"{work}/p2.json", "w"))
PY
: > "$work/times"
for i in $(seq 1 "$rounds"); do
  p=p1; [ $((i % 2)) = 0 ] && p=p2
  (cd "$work" && "$bin" apply "$p.json" --connect $uri --journal "j$i.json") |
    sed -n 's/.* in \([0-9.]*\) ms$/\1/p' >> "$work/times"
done
sort -n "$work/times" | awk -v type=$type '{ v[NR] = $1 } END {
  printf "%d VM applies (%s guests, live + config, read-back): min %.1f ms, median %.1f ms, p90 %.1f ms, max %.1f ms\n",
    NR, type, v[1], v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], v[NR] }'
