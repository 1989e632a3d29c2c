#!/usr/bin/env bash
# Issue 14 (5): reading big XML is linear. Writes a 50 MB domain (50 MB of
# <disk> devices) and a 50 MB capabilities file (50 MB of <guest> entries),
# then times `report`, `topology` and `xml --patch` on them with the release
# build. Target: each < 2 s. Needs python3 (to write the files) and xmllint
# (to check the patched output is well-formed).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_cargo
cargo build --release --locked -q -p pinplan-cli
bin="$CARGO_TARGET_DIR/release/pinplan"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
head = ("<domain type='kvm'>\n  <name>vm1</name>\n  <memory unit='KiB'>1048576</memory>\n"
        "  <vcpu placement='static'>14</vcpu>\n  <devices>\n")
disk = ("    <disk type='file' device='disk'><driver name='qemu' type='raw'/>"
        "<source file='/var/lib/libvirt/images/d%d.img'/><target dev='vd%d' bus='virtio'/></disk>\n")
parts, size, n = [head], len(head), 0
while size < 50_000_000:
    line = disk % (n, n); parts.append(line); size += len(line); n += 1
parts.append("  </devices>\n</domain>\n")
open(f"{work}/domain.xml", "w").write("".join(parts))
caps = open("tests/fixtures/libvirt-caps/caps-qemu-kvm.xml").read()
end = caps.index("</capabilities>")
guest = ("  <guest>\n    <os_type>hvm</os_type>\n    <arch name='x86_64'>\n"
         "      <machine maxCpus='255'>pc-%d</machine>\n    </arch>\n  </guest>\n")
parts, size, n = [], len(caps), 0
while size < 50_000_000:
    line = guest % n; parts.append(line); size += len(line); n += 1
open(f"{work}/caps.xml", "w").write(caps[:end] + "".join(parts) + caps[end:])
PY
"$bin" plan examples/lab/b1.toml --out "$work/plan" >/dev/null
t() { local s; s=$(date +%s.%N); "$@" >/dev/null; echo "$(echo "$(date +%s.%N) - $s" | bc) s: ${*##*/}"; }
t "$bin" report --domains "$work/domain.xml" --source examples/lab/b1-host.xml --host-cpus 0
t "$bin" topology --source "$work/caps.xml"
t "$bin" xml --plan "$work/plan/plan.json" --patch "$work/domain.xml" --set-vcpus --out "$work/patched.xml"
xmllint --noout "$work/patched.xml" && echo "patched output is well-formed"
