#!/usr/bin/env bash
# Runs every offline command of pinplan on every example and on the project's
# fixtures, and keeps each run's standard output, standard error and exit
# status under OUTDIR (one directory per run), with timings masked. Run it
# before and after a change that must not change behaviour, then compare:
#   scripts/compare-outputs.sh /tmp/before    # on the old commit
#   scripts/compare-outputs.sh /tmp/after     # on the new one
#   diff -r /tmp/before /tmp/after
# PINPLAN names the binary (default: the release build under CARGO_TARGET_DIR).
set -euo pipefail
out=${1:?usage: scripts/compare-outputs.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${PINPLAN:-${CARGO_TARGET_DIR:-$root/target}/release/pinplan}
[ -x "$bin" ] || { echo "no binary at $bin: build with cargo build --release -p pinplan-cli" >&2; exit 2; }
rm -rf "$out"; mkdir -p "$out"
out=$(cd "$out" && pwd)
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
cd "$root"
n=0
# run NAME ARGS...: one run; files it writes under $scratch/NAME/ are kept too.
run() {
    local name=$1; shift
    local dir=$out/$name w=$scratch/$name
    mkdir -p "$dir" "$w"
    set +e
    (cd "$root" && NO_COLOR=1 "$bin" "${@//@W@/$w}" >"$dir/stdout" 2>"$dir/stderr" </dev/null)
    echo $? >"$dir/status"
    set -e
    if [ -n "$(ls -A "$w")" ]; then cp -r "$w" "$dir/files"; fi
    # timings aside: "12 ms", "1.5 s", "(optimal, 3 ms)", elapsed seconds in JSON
    find "$dir" -type f -exec sed -i -E \
        -e 's/[0-9]+(\.[0-9]+)? ?(ms|µs|s)\b/T \2/g' \
        -e 's/"([a-z_]*(seconds|_ms|elapsed|millis)[a-z_]*)": ?[0-9.e+-]+/"\1": T/g' \
        -e "s#$scratch#SCRATCH#g" \
        -e 's/\(git [0-9a-f]+[^)]*\)/(git REV)/g' {} +
    n=$((n + 1))
}
# help pages, man, completions
run help "--help"
for t in formats policies exit-codes; do run "help-$t" help "$t"; done
for c in topology demand plan xml report apply doctor isolate completions man; do run "help-cmd-$c" "$c" --help; done
run man-page man
for s in bash zsh fish; do run "completions-$s" completions "$s"; done
# topology: every captured host, both formats
for f in tests/fixtures/hwloc-xml/*.xml tests/fixtures/libvirt-caps/*.xml tests/fixtures/inputs/caps-*.xml tests/fixtures/inputs/hwloc-*.xml examples/lab/b1-host.xml; do
    b=$(basename "$f" .xml)
    run "topology-$b-text" topology --source "$f"
    run "topology-$b-json" topology --source "$f" --format json
done
run topology-synthetic topology --source "synthetic:package:2 numa:2 l3:4 core:4 pu:2(indexes=2*32:1*2)" --format json
# demand
run demand-64 demand --table examples/lab/b1-tx-cores.csv --profile vm-64b --target 100 --min-fraction 0.97
run demand-512-json demand --table examples/lab/b1-tx-cores.csv --profile vm-512b --target 100 --format json
run demand-loo demand --table examples/lab/b1-tx-cores.csv --leave-one-out
# plans: every example and input spec, both formats, and with --out
for f in examples/*.toml examples/lab/b1.toml tests/fixtures/inputs/*.toml; do
    b=$(basename "$f" .toml)
    run "plan-$b-text" plan "$f"
    run "plan-$b-json" plan "$f" --format json
    run "plan-$b-out" plan "$f" --out @W@/plans
    run "plan-$b-greedy" plan "$f" --solver greedy --format json
done
# the lab's spec on other hosts
for f in tests/fixtures/hwloc-xml/*.xml; do
    b=$(basename "$f" .xml)
    run "plan-lab-on-$b" plan examples/lab/b1.toml --source "$f" --format json
done
# XML: every VM of the lab plan, written and patched into every libvirt domain fixture
"$bin" plan examples/lab/b1.toml --out "$scratch/lab" >/dev/null 2>&1 || true
for vm in vm1 vm2; do run "xml-$vm-guest" xml --plan "$scratch/lab/plan.json" --vm "$vm" --guest; done
run xml-guest-json xml --plan "$scratch/lab/plan.json" --guest --format json
run xml-tab-vm xml --plan tests/fixtures/inputs/tab-vm-plan.json --patch tests/fixtures/inputs/tab-vm.xml
for f in tests/fixtures/libvirt-domains/*.xml examples/lab/vm1.xml examples/lab/now/*.xml; do
    b=$(basename "$f" .xml)
    run "xml-patch-$b" xml --plan "$scratch/lab/plan.json" --vm vm2 --patch "$f"
    run "xml-patch-$b-set-vcpus" xml --plan "$scratch/lab/plan.json" --vm vm1 --patch "$f" --set-vcpus
done
# reports: the lab's domains in every format, with and without the plan; every domain fixture
for fmt in text json svg; do
    run "report-lab-$fmt" report --source examples/lab/b1-host.xml --domains examples/lab/now/vm1.xml examples/lab/now/vm2.xml --format "$fmt" --color never
    run "report-lab-plan-$fmt" report --source examples/lab/b1-host.xml --domains examples/lab/now/vm1.xml examples/lab/now/vm2.xml --plan "$scratch/lab/plan.json" --format "$fmt" --color never
done
for f in tests/fixtures/libvirt-domains/*.xml; do
    b=$(basename "$f" .xml)
    run "report-$b" report --source "synthetic:package:1 core:8 pu:2" --domains "$f" --format json
done
# doctor on the captured trees
for f in tests/fixtures/doctor/*.tar.*; do
    b=$(basename "$f"); b=${b%%.tar.*}
    mkdir -p "$scratch/tree-$b"; tar -xf "$f" -C "$scratch/tree-$b" 2>/dev/null || true
    r=$(find "$scratch/tree-$b" -maxdepth 3 -type d -name sys -printf '%h\n' | head -1)
    [ -n "$r" ] || r=$scratch/tree-$b
    run "doctor-$b-text" doctor --root "$r"
    run "doctor-$b-json" doctor --root "$r" --format json
done
for h in b1 jy; do
    run "doctor-fleet-$h" doctor --root "tests/fixtures/fleet/$h" --format json
done
run doctor-lab-plan doctor --root tests/fixtures/fleet/b1 --plan "$scratch/lab/plan.json"
run doctor-fleet doctor --fleet examples/fleet.toml --format json
# isolate: the boot-time way and the hook, offline
run isolate-kernel-args isolate --plan "$scratch/lab/plan.json" --emit kernel-args --force
run isolate-tuned isolate --plan "$scratch/lab/plan.json" --emit tuned --force
run isolate-hook isolate --plan "$scratch/lab/plan.json" --emit hook @W@/hooks --force
# fleet plans
run fleet-out plan examples/fleet.toml --out @W@/fleet
echo "$n runs under $out"
