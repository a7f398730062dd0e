"""How fast a course is graded on this machine: per submission, per batch, per course.

    python benchmarks/course_grading.py [--assignments warmup problem1 ...] [--skip-batch]

Everything printed is measured in this run, side by side (these machines are noisy: compare
ratios within one run):
1. Seconds per submission with `python -m graders` (a whole process, as instructors run it),
   for each assignment's solution, released stub and sample mistake: cold (empty verdict
   cache) and warm (the same submission again: every verdict served from the cache).
2. `nbgrader autograde` of one problem1 notebook against `python -m graders` on it.
3. Submissions per minute of `graders.batch` with 1 and 2 workers (and a 2-worker local Dask
   cluster when `dask.distributed` is installed), on a batch of problem1 submissions.
4. A projection for a 200- and a 1,000-student course (all five assignments), from the cold
   and warm per-submission times and the 2-worker speed-up, assuming `--duplication` of the
   submissions of each assignment are identical to an earlier one (say, the lecture's
   solution handed in unchanged), and with no duplication at all.
Targets (issue 12, 2 cores, Python 3.11): problem2 at most 8 s cold; the others at most
3.5 s; a whole course submission at most 25 s; 200 students in at most 45 minutes with
realistic duplication and 75 minutes with none.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
ASSIGNMENTS = ["warmup", "problem1", "problem2", "problem3", "problem4"]


def graded_seconds(path: str, assignment: str, env: dict) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graders", path, "-a", assignment, "--quiet"], cwd=ROOT,
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - started


TARGETS = {"problem2": 8.0}
"""Issue 12's per-submission targets (seconds, cold); 3.5 s for the others."""


def against(what: str, value: float, target: float, unit: str) -> str:
    verdict = "met" if value <= target else f"MISSED by {value - target:.1f} {unit} ({value / target:.2f}x)"
    return f"target for {what}: at most {target:g} {unit}; measured {value:.1f} {unit}: {verdict}"


def per_submission(assignments: list[str], cache: str) -> dict[str, dict[str, tuple[float, float]]]:
    """{assignment: {submission kind: (cold seconds, warm seconds)}}."""
    env = {**os.environ, "KIT_VERDICT_CACHE": cache}
    table = {}
    for assignment in assignments:
        kinds = {"solution": os.path.join(ROOT, "solutions", f"{assignment}.py"),
                 "stub": os.path.join(ROOT, "release", assignment, f"{assignment}.ipynb"),
                 "mistake": os.path.join(ROOT, "graders", "samples", f"{assignment}_mistakes.py")}
        table[assignment] = {}
        for kind, path in kinds.items():
            shutil.rmtree(cache, ignore_errors=True)
            cold = graded_seconds(path, assignment, env)
            warm = graded_seconds(path, assignment, env)
            table[assignment][kind] = (cold, warm)
            print(f"  {assignment:<9} {kind:<9} cold {cold:6.2f} s   warm {warm:6.2f} s", flush=True)
    return table


def nbgrader_against_graders(cache: str) -> tuple[float, float]:
    from graders.build import nbgrader
    from graders.demo import prepare_course

    env = {**os.environ, "KIT_VERDICT_CACHE": cache}
    with tempfile.TemporaryDirectory() as course:
        prepare_course("problem1", course)
        folder = os.path.join(course, "submitted", "solution", "problem1")
        os.makedirs(folder)
        notebook = os.path.join(folder, "problem1.ipynb")
        shutil.copy(os.path.join(ROOT, "solutions", "problem1", "problem1.ipynb"), notebook)
        shutil.rmtree(cache, ignore_errors=True)
        graders = graded_seconds(notebook, "problem1", env)
        shutil.rmtree(cache, ignore_errors=True)
        started = time.perf_counter()
        os.environ["KIT_VERDICT_CACHE"] = cache  # nbgrader's own process reads it
        nbgrader(["autograde", "problem1", "--force"], course)
        return graders, time.perf_counter() - started


def throughput(workers: int, count: int, cache: str, dask: bool = False) -> float:
    """Submissions per minute of the batch on `count` distinct problem1 submissions."""
    corpus = os.path.join(ROOT, "tests", "submissions", "problem1")
    files = sorted(f for f in os.listdir(corpus) if f.endswith(".py") and "loop" not in f
                   and "hang" not in f and "infinite" not in f)[:count]
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "submitted")
        os.makedirs(source)
        for name in files:
            shutil.copy(os.path.join(corpus, name), os.path.join(source, name))
        shutil.rmtree(cache, ignore_errors=True)
        command = [sys.executable, "-m", "graders.batch", "-a", "problem1", source, "-o",
                   os.path.join(tmp, "graded"), "--workers", str(workers)] + (["--dask"] if dask else [])
        started = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True,
                       env={**os.environ, "KIT_VERDICT_CACHE": cache})
        return len(files) / (time.perf_counter() - started) * 60


def projection(table, speedup: float, duplication: float) -> None:
    """Minutes for 200 and 1,000 students, all assignments, on this machine."""
    cold = sum(sum(t[0] for t in kinds.values()) / len(kinds) for kinds in table.values())
    warm = sum(sum(t[1] for t in kinds.values()) / len(kinds) for kinds in table.values())
    for label, share in (("with duplication", duplication), ("no duplication", 0.0)):
        per_student = (1 - share) * cold + share * warm
        for students in (200, 1000):
            minutes = students * per_student / speedup / 60
            print(f"  {students:>5} students, {label:<17} ({share:.0%} identical): "
                  f"{minutes:6.1f} minutes ({per_student:.1f} s per student's five submissions, "
                  f"{speedup:.2f}x from 2 workers)")
            if students == 200:
                print("    " + against("200 students", minutes, 45.0 if share else 75.0, "min"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignments", nargs="+", default=ASSIGNMENTS)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--duplication", type=float, default=0.5,
                        help="share of submissions identical to an earlier one (default 0.5)")
    parser.add_argument("--skip-batch", action="store_true")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="bench-verdicts-")
    print("1. seconds per submission (python -m graders, a whole process)")
    table = per_submission(args.assignments, cache)
    course = sum(kinds["solution"][0] for kinds in table.values())
    print(f"  one student's whole course (solutions, cold): {course:.1f} s")
    for assignment, kinds in table.items():
        print("  " + against(f"{assignment} solution, cold", kinds["solution"][0], TARGETS.get(assignment, 3.5), "s"))
    if set(table) == set(ASSIGNMENTS):
        print("  " + against("whole course, cold", course, 25.0, "s"))
    print("2. nbgrader autograde against python -m graders (problem1 solution notebook)")
    graders, autograde = nbgrader_against_graders(cache)
    print(f"  python -m graders {graders:.2f} s, nbgrader autograde {autograde:.2f} s: "
          f"{autograde / graders:.2f}x")
    print("  " + against("nbgrader against the graders", autograde / graders, 1.3, "x"))
    speedup = 1.0
    if not args.skip_batch:
        print(f"3. batch throughput, {args.batch_size} distinct problem1 submissions")
        one = throughput(1, args.batch_size, cache)
        two = throughput(2, args.batch_size, cache)
        speedup = two / one
        print(f"  1 worker {one:.1f}/min, 2 workers {two:.1f}/min ({speedup:.2f}x)")
        try:
            import dask.distributed  # noqa: F401

            print(f"  2-worker local Dask cluster {throughput(2, args.batch_size, cache, dask=True):.1f}/min")
        except ImportError:
            print("  (dask.distributed not installed: no Dask figure)")
    print("4. projected course grading time on this machine")
    projection(table, speedup, args.duplication)
    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
