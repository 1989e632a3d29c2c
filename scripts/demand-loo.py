#!/usr/bin/env python3
"""The leave-one-out figures of docs/demand-model.md on the published tables.

    python3 scripts/demand-loo.py [PINPLAN [DIR]]

PINPLAN defaults to pinplan on PATH, DIR to tests/fixtures/tables (the
development tables); tests/fixtures/tables/held-out holds the tables kept
aside to check the result.

Each file of tests/fixtures/tables/ is read per port speed (the `note`
column starts with 10GE or 40GE) at that line rate, as `pinplan demand
--leave-one-out --format json`, and the checks are pooled per file. Printed
per file: rows checked, the mean |error| of each family and of the family
chosen without the row (nested), and the share of rows inside their 90 %
interval.

A second pass is stricter: CSIT measured every test twice, at zero loss (a
profile ending -ndr) and at 0.5 % loss (-pdr), so a profile's nearest
profile is often its own test at the other loss rate. The strict pass checks
each profile's rows with that twin's rows removed from the tables.
"""

import csv
import io
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TABLES = os.path.join(HERE, "..", "tests", "fixtures", "tables")
SPEEDS = (("10GE", 10), ("40GE", 40))
FAMILIES = ("linear", "ceiling", "power", "usl", "similar")


def twin(profile):
    for a, b in (("-ndr", "-pdr"), ("-pdr", "-ndr")):
        if profile.endswith(a):
            return profile[: -len(a)] + b
    return None


def checks(pinplan, header, rows, line_rate):
    """`--leave-one-out --format json` on rows written to a file."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
        out = subprocess.run(
            [pinplan, "demand", "--table", path, "--line-rate", str(line_rate),
             "--leave-one-out", "--format", "json"],
            check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def mean(values):
    return 100 * sum(abs(v) for v in values) / len(values) if values else float("nan")


def main():
    pinplan = sys.argv[1] if len(sys.argv) > 1 else "pinplan"
    tables = sys.argv[2] if len(sys.argv) > 2 else TABLES
    total_in = total_with = 0
    print("| table | rows checked | " + " | ".join(FAMILIES)
          + " | chosen | inside 90 % | strict: chosen | strict: inside |")
    print("|---" * (len(FAMILIES) + 6) + "|")
    for name in sorted(os.listdir(tables)):
        if not name.endswith(".csv"):
            continue
        text = open(os.path.join(tables, name)).read()
        lines = [l for l in text.splitlines() if not l.startswith("#")]
        reader = csv.reader(io.StringIO("\n".join(lines)))
        header = next(reader)
        rows = list(reader)
        col = {c: i for i, c in enumerate(header)}
        loose, strict = [], []
        for speed, line_rate in SPEEDS:
            part = [r for r in rows if r[col["note"]].startswith(speed)]
            if not part:
                continue
            loose += checks(pinplan, header, part, line_rate)
            profiles = sorted({r[col["profile"]] for r in part})
            for p in profiles:
                t = twin(p)
                kept = [r for r in part if r[col["profile"]] != t]
                strict += [c for c in checks(pinplan, header, kept, line_rate)
                           if c["profile"] == p]
        inside = [c["inside"] for c in loose if c["inside"] is not None]
        s_inside = [c["inside"] for c in strict if c["inside"] is not None]
        total_in += sum(inside)
        total_with += len(inside)
        per_family = []
        for f in FAMILIES:
            errs = [c["errors"][f] for c in loose if f in c["errors"]]
            note = "" if len(errs) == len(loose) else f" ({len(errs)})"
            per_family.append(f"{mean(errs):.1f} %{note}")
        print(f"| {name} | {len(loose)} | " + " | ".join(per_family)
              + f" | **{mean([c['chosen_error'] for c in loose]):.1f} %**"
              + f" | {sum(inside)} of {len(inside)}"
              + f" | {mean([c['chosen_error'] for c in strict]):.1f} %"
              + f" | {sum(s_inside)} of {len(s_inside)} |")
    print(f"\nall tables: {total_in} of {total_with} rows inside their 90 % interval "
          f"({100 * total_in / total_with:.1f} %)")


if __name__ == "__main__":
    main()
