"""Where one submission's grading time goes, process by process, against the floor.

    python benchmarks/grading_time.py [-a problem1] [--submission PATH] [--repeat 3]

Prints, measured side by side in one run (verdict cache off; these machines are noisy, so
compare ratios):
- seconds for `python -m graders` (a whole process, as instructors run it), for the floor
  (`benchmarks/floor.py`: one unsandboxed process compiling each distinct program once),
  for the grading parent alone (`python -m graders --within` on a missing file: Python, pytest, the
  contract; no worker), and for starting Python + JAX with 8 devices (what each sandboxed
  worker pays before its first case), medians of --repeat, alternating;
- a timeline of one grading in this process (`grade_submission`): when the export worker
  reported the submission loaded, its first and last artifacts, when the judges took their
  first and last cases, and when the grading returned; then the phases the graders record
  (`SubmissionResult.timings`; the judges' phases add up over the judges).
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(command: list[str], env: dict, check: bool = True) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=check, capture_output=True)
    return time.perf_counter() - started


def whole_processes(assignment: str, submission: str, repeat: int) -> dict[str, list[float]]:
    from floor import floor_environment

    env = {**os.environ, "KIT_VERDICT_CACHE": "off"}
    py = sys.executable
    commands = {
        "python -m graders (whole process)": ([py, "-m", "graders", submission, "-a", assignment, "--quiet"], env),
        "floor (benchmarks/floor.py)": ([py, os.path.join(ROOT, "benchmarks", "floor.py"), assignment], floor_environment()),
        # --within: a file missing beneath a folder is graded (zeros, no worker), as in a batch;
        # without it, `python -m graders` stops at once with "no file at PATH".
        "grading parent alone (no worker)": ([py, "-m", "graders", os.path.join(ROOT, "missing.py"), "--within", ROOT,
                                              "-a", assignment, "--quiet"], env),
        "Python + JAX + 8 devices (one worker's start)": (
            [py, "-I", "-c", f"import sys; sys.path.insert(0, {ROOT!r}); from assignments.devices import "
                             f"setup_devices; setup_devices(8)"], env),
    }
    times: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(repeat):
        for label, (command, environment) in commands.items():
            times[label].append(timed(command, environment, check=not label.startswith("grading parent")))
    return times


def timeline(assignment: str, submission: str):
    """Grade once in this process, noting when each worker's events arrived."""
    from graders import harness, supervisor

    events: list[tuple[float, str, str]] = []
    read_event = supervisor.read_event

    def noted(line, known, kind):
        event = read_event(line, known, kind)
        events.append((time.perf_counter(), kind, event["event"]))
        return event

    supervisor.read_event = noted
    try:
        started = time.perf_counter()
        result = harness.grade_submission(submission, assignment)
        ended = time.perf_counter()
    finally:
        supervisor.read_event = read_event
    marks = collections.defaultdict(list)
    for at, kind, name in events:
        marks[(kind, name)].append(at - started)
    return result, ended - started, marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", "-a", default="problem1")
    parser.add_argument("--submission", help="default: the assignment's solution module")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    submission = args.submission or os.path.join(ROOT, "solutions", f"{args.assignment}.py")
    os.environ["KIT_VERDICT_CACHE"] = "off"
    print(f"{args.assignment}, {os.path.basename(submission)}, Python {sys.version.split()[0]}, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; median of {args.repeat}, alternating")
    times = whole_processes(args.assignment, submission, args.repeat)
    kit = statistics.median(times["python -m graders (whole process)"])
    for label, values in times.items():
        median = statistics.median(values)
        print(f"  {label:<48} {median:6.2f} s  ({median / kit:4.0%} of the kit's)   "
              f"[{' '.join(f'{v:.2f}' for v in values)}]")
    result, total, marks = timeline(args.assignment, submission)
    print(f"one grading in this process (grade_submission, no pytest): {total:.2f} s, score {result.score:g}")
    for (kind, name), at in sorted(marks.items(), key=lambda item: item[1][0]):
        print(f"  {kind:<6} {name:<9} x{len(at):<3} first {min(at):5.2f} s  last {max(at):5.2f} s")
    print("phases the graders record (judges' phases add up over the judges):")
    for phase, seconds in result.timings.items():
        print(f"  {phase:<38} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
