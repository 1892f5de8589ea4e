#!/usr/bin/env python3
"""The NUFFT benchmark of issue 14 beside pip finufft, in one run on one machine.

Cases: 2D 256^2 modes with 65,536 points and 3D 64^3 with 262,144 points,
tolerance 1e-6, single precision (complex64 data, float32 arithmetic), types
1 and 2, 1 and 8 transforms, points uniform in [-pi, pi). For each case the
two run alternately, `rounds` times, each round the best of `repeats` executes
after a warm-up (plans made once, not timed); the table gives the best over
rounds, the median of the round bests, and the CPU time per execute (user +
system, less sensitive to other jobs on the machine than wall time).

    python3 scripts/bench_nufft.py [--repeats 5] [--rounds 3] [--threads 2]

Needs `cargo build --release --example bench_nufft` and `pip install finufft`.
Prints machine, load and commit first, a markdown table last.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "target" / "release" / "examples" / "bench_nufft"
CASES = {"2d": ((256, 256), 65_536), "3d": ((64, 64, 64), 262_144)}


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def finufft_case(case: str, kind: int, transforms: int, repeats: int, threads: int, tol: float):
    import finufft

    shape, m = CASES[case]
    rng = np.random.default_rng(7)
    x = [rng.uniform(-np.pi, np.pi, m).astype(np.float32) for _ in shape]
    plan = finufft.Plan(kind, shape, n_trans=transforms, eps=tol, isign=1, dtype="complex64",
                        nthreads=threads)
    plan.setpts(*x)
    if kind == 1:
        data = (rng.standard_normal((transforms, m)) + 1j * rng.standard_normal((transforms, m)))
    else:
        data = (rng.standard_normal((transforms,) + shape)
                + 1j * rng.standard_normal((transforms,) + shape))
    data = data.astype(np.complex64)
    if transforms == 1:
        data = data[0]
    plan.execute(data)
    times = []
    c0 = cpu_seconds()
    for _ in range(repeats):
        t = time.perf_counter()
        plan.execute(data)
        times.append(time.perf_counter() - t)
    cpu = (cpu_seconds() - c0) / repeats
    return min(times) * 1e3, cpu * 1e3


def horecon_case(case: str, kind: int, transforms: int, repeats: int, threads: int, tol: float):
    env = dict(os.environ, HORECON_BENCH_TYPES=str(kind), HORECON_BENCH_TRANSFORMS=str(transforms),
               HORECON_BENCH_TOLERANCE=str(tol), RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([str(BENCH), str(repeats), case], env=env, check=True,
                         capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("case=")][-1]
    fields = dict(kv.split("=", 1) for kv in line.split())
    return float(fields["best_ms"]), float(fields["cpu_ms"]), fields


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--tolerance", type=float, default=1e-6)
    args = ap.parse_args()
    if not BENCH.exists():
        print(f"{BENCH} is missing: cargo build --release --example bench_nufft", file=sys.stderr)
        return 1
    import finufft

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")), platform.processor())
    print(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, commit {commit}, {cpu_model}, "
          f"{os.cpu_count()} CPUs, threads {args.threads}, finufft {finufft.__version__}, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    rows = []
    for case in CASES:
        for kind in (1, 2):
            for transforms in (1, 8):
                ours, theirs, ours_cpu, theirs_cpu = [], [], [], []
                fields = {}
                for _ in range(args.rounds):
                    ms, cpu, fields = horecon_case(case, kind, transforms, args.repeats,
                                                   args.threads, args.tolerance)
                    ours.append(ms)
                    ours_cpu.append(cpu)
                    ms, cpu = finufft_case(case, kind, transforms, args.repeats, args.threads,
                                           args.tolerance)
                    theirs.append(ms)
                    theirs_cpu.append(cpu)
                row = (case, kind, transforms, fields.get("sigma"), fields.get("w"),
                       min(ours), statistics.median(ours), min(ours_cpu),
                       min(theirs), statistics.median(theirs), min(theirs_cpu))
                rows.append(row)
                print(" ".join(str(v) for v in row), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    print()
    print("| case | type | transforms | horecon σ, w | horecon best / median ms | horecon CPU ms "
          "| finufft best / median ms | finufft CPU ms | ratio (best) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case, kind, t, s, w, ob, om, oc, tb, tm, tc in rows:
        print(f"| {case} | {kind} | {t} | {s}, {w} | {ob:.1f} / {om:.1f} | {oc:.1f} | "
              f"{tb:.1f} / {tm:.1f} | {tc:.1f} | {ob / tb:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
