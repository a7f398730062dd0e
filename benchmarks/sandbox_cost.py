"""What the sandbox costs: grading time with and without bubblewrap, side by side in one run.

    python benchmarks/sandbox_cost.py [--assignment problem1] [--repeats 3]

Grades the solution and the released stub of an assignment alternately in the sandbox and
with no isolation (`Limits(sandbox="none")`), so both see the same machine load, and prints
the median seconds per submission and their ratio. The verdict cache is off (otherwise every
run after the first would be served from it). Only trusted code (the kit's own solution and
stub) is graded without isolation here.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", "-a", default="problem1")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    os.environ["KIT_VERDICT_CACHE"] = "off"
    from graders import Limits, grade_submission

    submissions = {"solution": os.path.join(REPO_ROOT, "solutions", f"{args.assignment}.py"),
                   "stub": os.path.join(REPO_ROOT, "release", args.assignment, f"{args.assignment}.ipynb")}
    times: dict[tuple[str, str], list[float]] = {}
    scores = {}
    for _ in range(args.repeats):
        for name, path in submissions.items():
            for sandbox in ("auto", "none"):
                started = time.perf_counter()
                result = grade_submission(path, args.assignment, limits=Limits(sandbox=sandbox))
                times.setdefault((name, sandbox), []).append(time.perf_counter() - started)
                scores[(name, sandbox)] = result.score
    print(f"{args.assignment}: seconds per submission, median of {args.repeats}, alternating runs")
    print(f"{'submission':<10} {'sandboxed':>10} {'no isolation':>13} {'ratio':>7}  score (both)")
    for name in submissions:
        boxed = statistics.median(times[(name, "auto")])
        bare = statistics.median(times[(name, "none")])
        same = scores[(name, "auto")] == scores[(name, "none")]
        print(f"{name:<10} {boxed:>10.2f} {bare:>13.2f} {boxed / bare:>7.2f}  "
              f"{scores[(name, 'auto')]:g}{'' if same else ' vs ' + format(scores[(name, 'none')], 'g')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
