"""Batch grading throughput on this machine, where each submission's time goes, and what
caching or process reuse would save. Everything printed is measured in this run.

    python benchmarks/batch_grading.py [--assignment problem1] [--submissions 6] [--workers 1 2 4]
    python benchmarks/batch_grading.py --big          # 24 submissions: steadier numbers, ~5x longer

1. Submissions graded per minute by `graders.batch.run_batch` with 1, 2 and 4 workers, on a
   small batch mixing the solution, the untouched stub, the sample mistakes and corpus files;
   and the time a 200-student course would take at the best rate.
2. Seconds per submission in each phase, from the graders' own timings: starting Python and
   importing JAX (twice: export and judge workers), running the submission, tracing and
   exporting, compiling, and running and comparing.
3. What reuse saves: the start-up of one Python + JAX process (what a persistent worker pool
   would save, twice per submission), a rerun of a finished batch (every submission kept),
   and compiling one submission's artifacts cold against a warm JAX persistent compilation
   cache (what a cache shared across submissions could save on the judge's compilation).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

COMPILE_SCRIPT = r"""
import glob, json, sys, time
sys.path.insert(0, {root!r})
import jax
jax.config.update("jax_num_cpu_devices", 8)
cache = {cache!r}
if cache:
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
from assignments.contracts import get_assignment
from assignments.evaluate import make_mesh, place
from graders.harness import case_id
from graders.hidden import case_seed, hidden_cases, hidden_inputs
spec = get_assignment({assignment!r})
cases = hidden_cases(spec)
t0 = time.perf_counter()
n = 0
for part in spec.parts:
    for i, case in enumerate(cases[part.name]):
        path = {artifacts!r} + "/" + case_id(part, i) + ".jaxexport"
        try:
            blob = open(path, "rb").read()
        except OSError:
            continue
        exported = jax.export.deserialize(bytearray(blob))
        mesh = make_mesh(case.mesh, getattr(part, "axis_types", "auto"))
        arrays = hidden_inputs(spec, part, case, case_seed(spec.name, part.name, i))
        jax.jit(exported.call).lower(*place(arrays, part, mesh)).compile()
        n += 1
print(json.dumps({{"seconds": time.perf_counter() - t0, "artifacts": n}}))
"""


def submissions_for(assignment: str, count: int, folder: str) -> list:
    """`count` submissions cycling through the solution, the stub, the sample mistakes and
    the assignment's corpus files (those that finish quickly)."""
    from graders.batch import Submission
    from graders.samples import notebook_from, sample_path

    import nbformat

    pool = []
    solution_py = os.path.join(ROOT, "solutions", f"{assignment}.py")
    solution_nb = os.path.join(ROOT, "solutions", assignment, f"{assignment}.ipynb")
    release_nb = os.path.join(ROOT, "release", assignment, f"{assignment}.ipynb")
    pool += [p for p in (solution_nb, solution_py, release_nb) if os.path.exists(p)]
    mistakes = sample_path(f"{assignment}_mistakes.py")
    if os.path.exists(mistakes) and os.path.exists(release_nb):
        with open(mistakes) as f:
            path = os.path.join(folder, "mistakes.ipynb")
            nbformat.write(notebook_from(release_nb, f.read()), path)
            pool.append(path)
    corpus = os.path.join(ROOT, "tests", "submissions", assignment)
    quick = ("comm_whole_roll", "wrong_dtype", "wrong_shape", "raises", "missing_function", "nan_output")
    if os.path.isdir(corpus):
        pool += [os.path.join(corpus, f"{n}.py") for n in quick if os.path.exists(os.path.join(corpus, f"{n}.py"))]
    subs = []
    for k in range(count):
        src = pool[k % len(pool)]
        dst = os.path.join(folder, f"student{k:03d}{os.path.splitext(src)[1]}")
        shutil.copy(src, dst)
        subs.append(Submission(f"student{k:03d}", dst))
    return subs


def python_jax_startup(repeat: int = 3) -> float:
    code = (f"import sys; sys.path.insert(0, {ROOT!r}); from assignments.devices import setup_devices; "
            f"setup_devices(8)")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", code], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compile_seconds(assignment: str, artifacts: str, cache: str | None) -> dict:
    script = COMPILE_SCRIPT.format(root=ROOT, cache=cache, assignment=assignment, artifacts=artifacts)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    proc = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", default="problem1")
    parser.add_argument("--submissions", type=int, default=6)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--big", action="store_true", help="24 submissions")
    args = parser.parse_args()
    count = 24 if args.big else args.submissions

    from rich.console import Console
    from rich.table import Table

    from graders.batch import run_batch
    from graders.harness import grade_submission

    console = Console(width=110)
    console.print(f"[bold]batch grading benchmark[/bold]: {args.assignment}, {count} submissions, "
                  f"{os.cpu_count()} CPU(s), Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp:
        subs = submissions_for(args.assignment, count, tmp)

        rates = Table(title="1. throughput (run_batch, fresh results folder each time)")
        for column in ("workers", "wall (s)", "submissions / minute", "200 students (min)"):
            rates.add_column(column, justify="right")
        phase_runs = []
        best = 0.0
        for workers in args.workers:
            out = os.path.join(tmp, f"out-{workers}")
            t0 = time.perf_counter()
            outcomes = run_batch(subs, args.assignment, out, workers=workers)
            wall = time.perf_counter() - t0
            rate = len(outcomes) / wall * 60
            best = max(best, rate)
            rates.add_row(str(workers), f"{wall:.1f}", f"{rate:.1f}", f"{200 / rate:.0f}")
            phase_runs.append(outcomes)
        console.print(rates)

        phases: dict[str, list[float]] = {}
        for outcome in phase_runs[0]:  # the 1-worker run: no contention between submissions
            for phase, seconds in (outcome.results.get("extra_data", {}).get("timings") or {}).items():
                phases.setdefault(phase, []).append(seconds)
        table = Table(title="2. seconds per submission by phase (1 worker, mean)")
        table.add_column("phase")
        table.add_column("seconds", justify="right")
        table.add_column("share", justify="right")
        total = sum(statistics.mean(v) for v in phases.values()) or 1.0
        for phase, values in sorted(phases.items()):
            table.add_row(phase, f"{statistics.mean(values):.2f}", f"{statistics.mean(values) / total:.0%}")
        table.add_row("total", f"{total:.2f}", "100%")
        console.print(table)

        startup = python_jax_startup()
        t0 = time.perf_counter()
        run_batch(subs, args.assignment, os.path.join(tmp, f"out-{args.workers[0]}"), workers=args.workers[0])
        rerun = time.perf_counter() - t0
        artifacts = os.path.join(tmp, "artifacts")
        solution = next((s.path for s in subs if s.path.endswith(".py")), subs[0].path)
        grade_submission(solution, args.assignment, keep_artifacts=artifacts)
        cold = compile_seconds(args.assignment, artifacts, None)
        cache = os.path.join(tmp, "jax-cache")
        compile_seconds(args.assignment, artifacts, cache)  # fills the cache
        warm = compile_seconds(args.assignment, artifacts, cache)
        reuse = Table(title="3. what reuse saves (measured)")
        reuse.add_column("what")
        reuse.add_column("seconds", justify="right")
        reuse.add_column("saving per submission", justify="right")
        reuse.add_row("start Python + import JAX + 8 devices, one process (median of 3)", f"{startup:.2f}",
                      f"{2 * startup:.2f} s with reused export and judge workers")
        reuse.add_row(f"rerun of the finished {count}-submission batch (all kept)", f"{rerun:.3f}",
                      f"{rerun / count * 1000:.1f} ms to skip one")
        reuse.add_row(f"compile {cold['artifacts']} artifacts of one submission, no cache", f"{cold['seconds']:.2f}", "")
        reuse.add_row("the same with a warm persistent compilation cache", f"{warm['seconds']:.2f}",
                      f"{cold['seconds'] - warm['seconds']:.2f} s (right answers compile alike)")
        console.print(reuse)
    console.print(f"best rate {best:.1f} submissions/minute: a 200-student course in about "
                  f"{200 / best:.0f} minutes on this machine (target: under 30)")


if __name__ == "__main__":
    main()
