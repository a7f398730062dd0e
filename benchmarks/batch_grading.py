"""Batch grading throughput on this machine, and where each submission's time goes.

    python benchmarks/batch_grading.py [-a problem1] [--students 8] [--workers 1 2] [--seed 0]

On a realistic class (`benchmarks/realistic_class.py`), verdict cache off, everything
measured in this run:
1. submissions per minute of `graders.batch.run_batch` with each number of workers, and
   what a 200-student course of this one assignment would take at that rate;
2. seconds per submission in each phase the graders record (`SubmissionResult.timings`, the
   1-worker run: no contention between submissions; the judges' phases add up over the
   judges), beside the whole grading process (`execution_time`);
3. what reuse would save: starting Python + JAX with 8 devices (every submission starts an
   export worker and one or two judges, each paying it), and a rerun of the finished batch
   (every unchanged submission is kept, not regraded).
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def python_jax_startup(repeat: int = 3) -> float:
    code = f"import sys; sys.path.insert(0, {ROOT!r}); from assignments.devices import setup_devices; setup_devices(8)"
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", code], check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", "-a", default="problem1")
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ["KIT_VERDICT_CACHE"] = "off"  # the grading processes inherit it

    from graders.batch import discover, run_batch
    from realistic_class import write_class

    print(f"batch grading benchmark: {args.assignment}, a realistic class of {args.students}, cache off, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp:
        folder = os.path.join(tmp, "class")
        write_class(args.assignment, args.students, folder, args.seed)
        submissions = discover(folder, args.assignment)
        print("1. throughput (run_batch, a fresh results folder each time)")
        runs = {}
        for workers in args.workers:
            out = os.path.join(tmp, f"out-{workers}")
            started = time.perf_counter()
            runs[workers] = run_batch(submissions, args.assignment, out, workers=workers)
            wall = time.perf_counter() - started
            rate = len(submissions) / wall * 60
            print(f"  {workers} worker(s): {wall:6.1f} s, {rate:5.1f} submissions/minute, "
                  f"200 students in {200 / rate:5.1f} min")
        first = runs[args.workers[0]]
        phases = collections.defaultdict(list)
        for outcome in first:
            for phase, seconds in outcome.result.timings.items():
                phases[phase].append(seconds)
        print(f"2. seconds per submission by phase ({args.workers[0]} worker(s), mean of {len(first)})")
        print(f"  {'whole grading process (execution_time)':<40} {statistics.mean(o.result.execution_time for o in first):6.2f}")
        for phase, values in phases.items():
            print(f"  {phase:<40} {statistics.mean(values):6.2f}")
        startup = python_jax_startup()
        started = time.perf_counter()
        run_batch(submissions, args.assignment, os.path.join(tmp, f"out-{args.workers[0]}"), workers=args.workers[0])
        rerun = time.perf_counter() - started
        print("3. what reuse saves (measured)")
        print(f"  start Python + import JAX + 8 devices, one process (median of 3): {startup:.2f} s "
              f"(paid by the export worker and each judge of every submission)")
        print(f"  rerun of the finished batch (all kept): {rerun:.2f} s, {rerun / len(submissions) * 1000:.0f} ms a submission")
    return 0


if __name__ == "__main__":
    sys.exit(main())
