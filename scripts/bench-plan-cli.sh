#!/usr/bin/env bash
# Times `pinplan plan SPEC --format json` end to end (process start, topology
# load, spec check, solve with explanations, JSON output) on the 40 specs of
# the plan bench's seeded set (part 3 of `cargo bench -p pinplan --bench plan`:
# 8 hosts x 90-130 % load), release build: RUNS runs per spec (default 3), the
# median per spec, then median / p90 / max over the specs; then one pass with
# `--time-limit 1` and its worst wall time. Results go in docs/benchmarks.md.
# Usage: scripts/bench-plan-cli.sh [RUNS [SPEC_DIR]]
#   SPEC_DIR: specs written before (by this script or by the bench with
#   PLAN_BENCH_SPECS=DIR); default: generated afresh in a temporary directory.
# The specs name no NIC where the host lists no PCI device on the VM's NIC
# node (all fixtures but 192em64t-24n8c2t.xml): there the CLI's requests have
# less NIC locality than the bench's.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_cargo
apt_install "${BUILD_PACKAGES[@]}"
command -v python3 >/dev/null || { echo "error: python3 is needed to read the plans" >&2; exit 2; }
runs=${1:-3}
cargo build --release --locked -q -p pinplan-cli
bin=$CARGO_TARGET_DIR/release/pinplan
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
specs=${2:-}
if [ -z "$specs" ]; then
  specs=$work/specs
  # The bench writes the specs only (no solving) with PLAN_BENCH_SPECS_ONLY.
  PLAN_BENCH_PART=3 PLAN_BENCH_SPECS=$specs PLAN_BENCH_SPECS_ONLY=1 \
    cargo bench --locked -q -p pinplan --bench plan >/dev/null
fi
shopt -s nullglob
files=("$specs"/*.toml)
[ ${#files[@]} -gt 0 ] || { echo "error: no *.toml in $specs" >&2; exit 2; }

# run SPEC OUT [ARGS...]: one `pinplan plan`, prints its wall time in ms.
# Exit 1 (not every VM placed) is an answer; anything else is an error.
run() {
  local spec=$1 out=$2 src rc=0 t0 t1
  shift 2
  src=$(sed -n 's/^# source: //p' "$spec")
  t0=$(date +%s.%N)
  "$bin" plan "$spec" ${src:+--source "$src"} --format json "$@" >"$out" 2>"$out.err" || rc=$?
  t1=$(date +%s.%N)
  if [ "$rc" -gt 1 ]; then
    echo "error: pinplan plan $spec exited $rc:" >&2; cat "$out.err" >&2; exit 2
  fi
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }'
}

# summary FILE LABEL: name, ms, ... per line; prints median / p90 / max of ms.
summary() {
  sort -t' ' -k2 -g "$1" | awk -v label="$2" '{ v[NR] = $2; n[NR] = $1 } END {
    p90 = int(NR * 0.9); if (p90 < NR * 0.9) p90++
    printf "%s over %d specs: median %.1f ms, p90 %.1f ms, max %.1f ms (%s)\n",
      label, NR, v[int((NR + 1) / 2)], v[p90], v[NR], n[NR] }'
}

# fields JSON: status, proven, placed/asked, solver (greedy: the ILP fell back).
fields() {
  python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
asked = len(p["vms"]) + len(p["unplaced"])
print(p["status"], "yes" if p["proven"] else "no", f'{p["objective"]["placed"]}/{asked}', p["solver"])
PY
}

echo "== pinplan plan SPEC --format json: $runs runs per spec, median (release, default --time-limit 10) =="
printf '%-16s %9s %-28s %-11s %-6s %-7s %s\n' spec "wall ms" "runs ms" status proven placed solver
: >"$work/default"
for spec in "${files[@]}"; do
  name=$(basename "$spec" .toml)
  times=()
  for _ in $(seq 1 "$runs"); do times+=("$(run "$spec" "$work/out.json")"); done
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  read -r status proven placed solver <<<"$(fields "$work/out.json")"
  printf '%-16s %9s %-28s %-11s %-6s %-7s %s\n' "$name" "$median" "${times[*]}" "$status" "$proven" "$placed" "$solver"
  echo "$name $median $status $proven" >>"$work/default"
done
echo
summary "$work/default" "wall time (median of $runs)"
echo "proven optimal: $(awk '$4 == "yes"' "$work/default" | wc -l)/${#files[@]}; every VM placed: $(awk '$3 != "infeasible"' "$work/default" | wc -l)/${#files[@]}"

echo
echo "== the same with --time-limit 1: one run per spec =="
: >"$work/limit1"
for spec in "${files[@]}"; do
  name=$(basename "$spec" .toml)
  t=$(run "$spec" "$work/out.json" --time-limit 1)
  read -r status proven placed solver <<<"$(fields "$work/out.json")"
  echo "$name $t $status $proven $placed $solver" >>"$work/limit1"
done
sort -t' ' -k2 -g "$work/limit1" | tail -n 5 | awk '{ printf "  slowest: %-16s %8.1f ms  %s, proven %s, placed %s, solver %s\n", $1, $2, $3, $4, $5, $6 }'
summary "$work/limit1" "wall time, --time-limit 1"
echo "proven optimal: $(awk '$4 == "yes"' "$work/limit1" | wc -l)/${#files[@]}; over 1 s: $(awk '$2 > 1000' "$work/limit1" | wc -l)"
