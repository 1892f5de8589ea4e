#!/usr/bin/env python3
"""The batch runner (horecon.batch) against a plain loop, in the same run.

    python3 scripts/bench_batch.py                 # 64 bieri-256 slices, 50 CG iterations each
    python3 scripts/bench_batch.py --ci            # CI-sized: 64 bieri-64 slices, 5 iterations, CPU
    python3 scripts/bench_batch.py --workers 2     # two Dask workers (two GPUs, or CPU workers)
    python3 scripts/bench_batch.py --no-solve      # the runner's own cost: real inputs, no plan
    python3 scripts/bench_batch.py --timing        # where each slice's time goes, per form

Each slice is a shared/bench/cases.py problem (seed = slice index): the plan
is built, CG runs a fixed number of iterations (tolerance 0), the image is
written as .npy. The plain loop does exactly that one slice after another in
this process; the runner does it through horecon.batch, on a Dask LocalCluster
(started and warmed up, one slice per worker, before the clock starts: the
start and the per-process NVRTC compilation are printed, not counted) and in
its one-process mode. Overhead = runner time / loop time - 1. The images of
the runner and the loop are compared (they must agree to float32 rounding).
$HORECON_SHARED or ../shared/bench locates cases.py (as the Python tests do).
With --no-solve every slice's inputs are made (where the task runs) and a
zero image is written, without a plan: the runner's own per-task cost
(inputs, transfers, scheduling, writing) at the case's real sizes, on any
machine; it is printed in ms per slice.
"""

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def find_cases():
    env = os.environ.get("HORECON_SHARED")
    places = [ROOT / "shared" / "bench", ROOT.parent / "shared" / "bench"]
    for c in ([Path(env) / "bench", Path(env)] if env else []) + places:
        if (c / "cases.py").is_file():
            sys.path.insert(0, str(c))
            return
    sys.exit("bench_batch: shared/bench/cases.py not found; set HORECON_SHARED to the shared folder")


def slice_problem(case, seed, iterations, size=None):
    """Slice `seed` of `case` (cases.make_case), made where it is called (on
    the worker for the runner). `size` shrinks the image (CI form)."""
    import cases
    from horecon import batch

    if size is not None:
        nx, ny, nz, L, _, B, offres = cases.CASES[case]
        cases.CASES[f"{case}@{size}"] = (size, size, nz, L, size * size // 8, B, offres)
        case = f"{case}@{size}"
    c = cases.make_case(case, seed=seed)
    return batch.Problem(
        f"slice{seed:03d}",
        (c["nx"], c["ny"]),
        c["data"],
        ncoils=c["L"],
        positions=c["positions"],
        solid_harmonics=c["coefficients"],
        off_resonance=(c["off_resonance"], c["times"]) if c["off_resonance"] is not None else None,
        sensitivities=c["sensitivities"],
        cg={"max_iterations": iterations, "tolerance": 0.0},
    )


def timed_make(make):
    """`make()` with its wall time kept on the problem (``--timing``)."""
    start = time.perf_counter()
    problem = make()
    problem.make_seconds = time.perf_counter() - start
    return problem


def timed_solve(solve, problem, plan_options):
    """`solve` with its wall time and the inputs' in the info (``--timing``)."""
    start = time.perf_counter()
    image, info = solve(problem, plan_options)
    info = dict(info)
    info["solve_seconds"] = time.perf_counter() - start
    info["make_seconds"] = getattr(problem, "make_seconds", float("nan"))
    return image, info


def breakdown(infos, seconds):
    """'inputs x ms, solve y ms, rest z ms' per slice from the infos of one form."""
    n = max(1, len(infos))
    make = 1000 * sum(i["make_seconds"] for i in infos) / n
    solve = 1000 * sum(i["solve_seconds"] for i in infos) / n
    return f"inputs {make:.1f} ms, solve {solve:.1f} ms, rest {1000 * seconds / n - make - solve:+.1f} ms"


def no_solve(problem, plan_options):
    """A `reconstruct` that builds no plan: a zero image of the problem's shape."""
    return np.zeros(tuple(problem.shape), np.complex64), {"iterations": 0}


def plain_loop(items, out, options, reconstruct, infos=None):
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for name, make in items:
        image, info = reconstruct(make(), options)
        np.save(out / f"{name}.npy", image)
        if infos is not None:
            infos.append(info)
    return time.perf_counter() - start


def usage():
    """(page faults, CPU seconds) of this process so far."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt + r.ru_majflt, r.ru_utime + r.ru_stime


def compare(a, b, names):
    worst = 0.0
    for n in names:
        x, y = np.load(a / f"{n}.npy"), np.load(b / f"{n}.npy")
        worst = max(worst, float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30)))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="bieri-256")
    ap.add_argument("--slices", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--ci", action="store_true", help="64 slices of 64x64 (bieri-256's model), 5 iterations, CPU")
    ap.add_argument("--size", type=int, help="slices of size x size (the case's model, M = size^2 / 8)")
    ap.add_argument("--workers", type=int, default=1, help="Dask workers (default 1)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--precision", default="accurate", choices=["accurate", "fast", "double"])
    ap.add_argument("--no-dask", action="store_true", help="only the loop and the one-process runner")
    ap.add_argument("--no-solve", action="store_true", help="make the inputs and write zero images, no plan "
                    "(the runner's own per-task cost)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the three forms; the best of each (default 1)")
    ap.add_argument("--keep", help="write the images here (default: a temporary folder, removed)")
    ap.add_argument("--timing", action="store_true", help="per slice and form, last round: the time making "
                    "the inputs, solving, and the rest (hand-off, writing)")
    args = ap.parse_args()
    find_cases()
    import horecon
    from horecon import batch

    size = args.size
    if args.ci:
        size, args.iterations, args.backend = 64, 5, "cpu"
    backend = args.backend
    if backend == "auto":
        backend = "cuda" if horecon.cuda_device_count() > 0 else "cpu"
    items = [(f"slice{s:03d}", functools.partial(slice_problem, args.case, s, args.iterations, size))
             for s in range(args.slices)]
    c = items[0][1]()
    shape = "x".join(str(d) for d in c.shape)
    print(
        f"bench_batch: {args.case}{'@' + str(size) if size else ''} ({shape}, {c.ncoils} coils, "
        f"M {np.asarray(c.data).size // c.ncoils}), {args.slices} slices, "
        f"{'no solve' if args.no_solve else f'{args.iterations} CG iterations'}, "
        f"backend {backend}, precision {args.precision}, {args.workers} Dask worker(s), "
        f"{os.cpu_count()} cores, {horecon.cuda_device_count()} GPU(s)",
        flush=True,
    )
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="horecon-bench-batch-"))
    names = [n for n, _ in items]
    solve = no_solve if args.no_solve else batch.reconstruct
    if args.timing:
        items = [(n, functools.partial(timed_make, make)) for n, make in items]
        solve = functools.partial(timed_solve, solve)
    common = dict(backend=backend, precision=args.precision, progress=False, reconstruct=solve)
    cluster = client = None
    try:
        # the plain loop: one slice first to warm this process up (NVRTC, library load)
        options = {"backend": backend, "precision": args.precision, "threads": 0}
        plain_loop(items[:1], work / "warm", options, solve)
        if not args.no_dask:
            try:
                from distributed import Client
            except ImportError:
                print("runner, Dask          skipped: Dask is not installed (pip install dask distributed)")
                args.no_dask = True
        if not args.no_dask:
            t0 = time.perf_counter()
            cluster = batch.local_cluster(args.workers)
            client = Client(cluster)
            t_start = time.perf_counter() - t0
            threads = max(1, (os.cpu_count() or 1) // args.workers)
            warm = batch.run(items[: args.workers], work / "warm-dask", scheduler=client, n_workers=args.workers,
                             threads=threads, **common)
            warm.raise_for_failures()
            print(f"Dask cluster start {t_start:.1f} s, warm-up {warm.seconds:.1f} s: not counted", flush=True)
        best, costs, timing = {}, {}, {}
        for _ in range(args.repeat):
            # the three forms in turn, each round: a best of N that a busy machine spoils least
            before = usage()
            infos = []
            t = plain_loop(items, work / "loop", options, solve, infos)
            best["plain loop"] = min(best.get("plain loop", t), t)
            costs["plain loop"] = np.subtract(usage(), before)
            timing["plain loop"] = (infos, t)
            report = batch.run(items, work / "local", scheduler="local", threads=0, **common)
            report.raise_for_failures()
            best["runner, one process"] = min(best.get("runner, one process", report.seconds), report.seconds)
            timing["runner, one process"] = ([r.info for r in report.results], report.seconds)
            if client is not None:
                before = client.run(usage)
                report = batch.run(items, work / "dask", scheduler=client, n_workers=args.workers, threads=threads,
                                   **common)
                report.raise_for_failures()
                after = client.run(usage)
                costs["Dask workers"] = sum(np.subtract(after[w], before[w]) for w in after)
                key = f"runner, Dask x{args.workers}"
                best[key] = min(best.get(key, report.seconds), report.seconds)
                timing[key] = ([r.info for r in report.results], report.seconds)
        t_loop = best["plain loop"]
        print(f"plain loop            {t_loop:8.2f} s  ({1000 * t_loop / args.slices:.1f} ms per slice)"
              f"{f', best of {args.repeat}' if args.repeat > 1 else ''}")
        for key, t in list(best.items())[1:]:
            folder = "dask" if "Dask" in key else "local"
            print(f"{key:21} {t:8.2f} s  overhead {100 * (t / t_loop - 1):+6.1f} % "
                  f"({1000 * (t - t_loop) / args.slices:+.1f} ms per slice)  speed-up {t_loop / t:.2f}x  "
                  f"|runner - loop| {compare(work / folder, work / 'loop', names):.1e}")
        # deterministic where the times are not (a busy machine): what the slices cost the processes
        print("per slice, last round: " + "; ".join(
            f"{key} {faults / args.slices:.0f} page faults, {1000 * cpu / args.slices:.1f} ms CPU"
            for key, (faults, cpu) in costs.items()))
        if args.timing:
            print("per slice, last round: " + "; ".join(
                f"{key}: {breakdown(infos, t)}" for key, (infos, t) in timing.items()))
        print("RESULT bench_batch " + "; ".join(f"{n} {t:.2f} s ({100 * (t / t_loop - 1):+.1f} %)"
                                                for n, t in best.items()))
    finally:
        if client is not None:
            client.close()
            cluster.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
