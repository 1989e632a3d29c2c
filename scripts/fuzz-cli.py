#!/usr/bin/env python3
"""Issue 14's fuzz campaign through the binary: valid seeds of every input
pinplan reads, mutated by random byte edits, through the commands that read
them. Counts panics (exit 101), signals, hangs (over 20 s), and exit-2
messages that do not name the input file. Usage:

    scripts/fuzz-cli.py [RUNS] [SEED]      # default 3000 runs, seed 1

Needs a release build (`cargo build --release -p pinplan-cli`); prints a
summary and the first failures of each kind, and exits 1 if there are any."""
import os, random, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/pinplan-target"))
BIN = os.path.join(TARGET, "release", "pinplan")
LAB = os.path.join(ROOT, "examples", "lab")
FIX = os.path.join(ROOT, "tests", "fixtures")

def mutate(data, rng):
    data = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(data) + 1)
        kind = rng.randrange(4)
        if kind == 0 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:
            data[at:at] = rng.choice([b"&x;", b"&#x110000;", b"<", b'"', b"]]>", b"\x00", b"\n",
                                      bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))])
        elif kind == 2:
            del data[at:at + rng.randint(1, 64)]
        else:
            lo = rng.randrange(len(data) + 1)
            data[at:at] = data[lo:lo + rng.randint(1, 200)]
    return bytes(data)

def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    work = tempfile.mkdtemp(prefix="pinplan-fuzz-")
    for f in ["b1-host.xml", "b1-tx-cores.csv", "vm1.xml"]:
        shutil.copy(os.path.join(LAB, f), work)
    plan_dir = os.path.join(work, "plan")
    subprocess.run([BIN, "plan", os.path.join(LAB, "b1.toml"), "--out", plan_dir],
                   capture_output=True, check=True)
    plan = os.path.join(plan_dir, "plan.json")
    host = os.path.join(LAB, "b1-host.xml")
    seeds = [
        ("hwloc", os.path.join(FIX, "hwloc-xml", "16em64t-4s2c2t.xml"), lambda f: ["topology", "--source", f]),
        ("hwloc", os.path.join(FIX, "hwloc-xml", "x86-Intel-Skylake-2xXeon6140.xml"), lambda f: ["topology", "--source", f]),
        ("caps", os.path.join(FIX, "libvirt-caps", "caps-qemu-kvm.xml"), lambda f: ["topology", "--source", f]),
        ("domain", os.path.join(LAB, "now", "vm1.xml"), lambda f: ["report", "--domains", f, "--source", host, "--host-cpus", "0"]),
        ("patch", os.path.join(LAB, "vm1.xml"), lambda f: ["xml", "--plan", plan, "--patch", f, "--set-vcpus"]),
        ("spec", os.path.join(LAB, "b1.toml"), lambda f: ["plan", f, "--time-limit", "5"]),
        ("table", os.path.join(LAB, "b1-tx-cores.csv"), lambda f: ["demand", "--table", f, "--profile", "vm-64b", "--target", "100"]),
        ("table-loo", os.path.join(LAB, "b1-tx-cores.csv"), lambda f: ["demand", "--table", f, "--leave-one-out"]),
        ("plan", plan, lambda f: ["xml", "--plan", f, "--vm", "vm1"]),
        ("plan-report", plan, lambda f: ["report", "--plan", f, "--domains", os.path.join(LAB, "now", "vm1.xml"), "--source", host]),
    ]
    seeds = [(k, open(p, "rb").read(), p, c) for k, p, c in seeds]
    counts, failures = {}, {"panic": [], "signal": [], "hang": [], "unnamed": [], "bad-output": []}
    for n in range(runs):
        kind, data, path, command = seeds[n % len(seeds)]
        ext = os.path.splitext(path)[1]
        name = os.path.join(work, f"case-{n}{ext}")
        with open(name, "wb") as f:
            f.write(mutate(data, rng))
        try:
            out = subprocess.run([BIN] + command(name), capture_output=True, timeout=20, cwd=work)
        except subprocess.TimeoutExpired:
            failures["hang"].append((kind, name))
            continue
        code = out.returncode
        counts[(kind, code)] = counts.get((kind, code), 0) + 1
        stderr = out.stderr.decode("utf-8", "replace")
        if code == 101:
            failures["panic"].append((kind, name, stderr[:300]))
        elif code < 0 or code > 2:
            failures["signal"].append((kind, name, code))
        elif code == 2 and os.path.basename(name) not in stderr:
            failures["unnamed"].append((kind, name, stderr.splitlines()[0] if stderr else ""))
        elif code == 0 and kind == "patch":
            check = subprocess.run(["xmllint", "--noout", "-"], input=out.stdout, capture_output=True)
            if check.returncode != 0:
                failures["bad-output"].append((kind, name))
        else:
            os.remove(name)
    print(f"{runs} runs")
    for kind in sorted({k for k, _ in counts}):
        print(f"  {kind:<12} " + ", ".join(f"exit {c}: {counts[(kind, c)]}" for c in sorted(c for k, c in counts if k == kind)))
    bad = 0
    for what, cases in failures.items():
        print(f"{what}: {len(cases)}")
        bad += len(cases)
        for case in cases[:5]:
            print("   ", case)
    print(f"inputs kept in {work}" if bad else "")
    if not bad:
        shutil.rmtree(work)
    sys.exit(1 if bad else 0)

main()
