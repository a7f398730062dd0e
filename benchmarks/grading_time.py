"""How long grading one problem1 submission takes, and where the time goes.

    python benchmarks/grading_time.py [--repeat 3]

Prints, measured side by side in one run (these machines are noisy, so compare ratios):
- seconds for `python -m graders` on the solution notebook (a whole process, as instructors run it),
- seconds for `nbgrader autograde` of that one notebook (kernel execution + the graders),
- the share of the graders' time spent starting Python and importing JAX, running the
  submission, tracing and exporting, compiling, and running and comparing.
Target (issue 2): under 20 s per submission on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def timed(cmd, cwd) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from graders.build import nbgrader
    from graders.demo import prepare_course

    notebook = os.path.join(ROOT, "solutions", "problem1", "problem1.ipynb")
    py = sys.executable
    import_jax, cli, nbg = [], [], []
    with tempfile.TemporaryDirectory() as course:
        prepare_course("problem1", course)
        folder = os.path.join(course, "submitted", "solution", "problem1")
        os.makedirs(folder)
        shutil.copy(notebook, os.path.join(folder, "problem1.ipynb"))
        for _ in range(args.repeat):
            import_jax.append(timed([py, "-c", "import jax; jax.devices()"], ROOT))
            cli.append(timed([py, "-m", "graders", notebook, "-a", "problem1", "--quiet"], ROOT))
            t0 = time.perf_counter()
            nbgrader(["autograde", "problem1", "--force"], cwd=course)
            nbg.append(time.perf_counter() - t0)

    import assignments

    assignments.setup_devices(8)
    from graders import grade_submission

    result = grade_submission(notebook, "problem1")
    med = statistics.median
    print(f"problem1, solution notebook, median of {args.repeat} runs, Python {sys.version.split()[0]}")
    print(f"  python -m graders (whole process):          {med(cli):6.2f} s")
    print(f"  nbgrader autograde of 1 notebook:           {med(nbg):6.2f} s  "
          f"({med(nbg) / med(cli):.1f}x the graders alone)")
    print(f"  python -c 'import jax' alone:               {med(import_jax):6.2f} s  "
          f"({med(import_jax) / med(cli):.0%} of the graders' process; paid twice: parent and child)")
    total = sum(result.timings.values())
    print(f"  inside grade_submission ({total:.2f} s):")
    for phase, seconds in result.timings.items():
        print(f"    {phase:38s} {seconds:6.2f} s  {seconds / total:5.0%}")


if __name__ == "__main__":
    main()
