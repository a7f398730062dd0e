"""Which corpus tests to run on the older stack: each test's CPU and the rules its gradings break.

    python benchmarks/rule_samples.py [-n 3] [tests/test_problem3.py ...]

Runs the rule corpora's tests (by default every module `tests/older_stack.py` names) on this
stack, as `.ci/run` would before sampling (all but `arithmetic`), recording for each test its
CPU-seconds and the rule ids of the problems its gradings find (`grading.graded`, fresh or
from the session's cache). Then prints:
1. the CPU of the tests `tests/older_stack.py` names, against all of them;
2. for each (assignment, rule) pair some test breaks, whether the table samples it, and the
   cheapest test that would (a greedy cover: the test that covers the most pairs not yet
   covered per CPU-second, first);
3. the honest designs (gradings with no problem at all) the table does not list.
A rule a new corpus file breaks, or a sample that stopped breaking its rule, shows up here
(the second also fails its test: `tests/conftest.py` `rule_sample_met`).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIABLE = "KIT_RULE_SAMPLES_OUT"


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# --- as a pytest plugin (-p rule_samples), in each worker ------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import grading

    start = _cpu()
    with grading.rules_found() as found:
        result = yield
    record = {"node": item.nodeid.removeprefix("tests/"), "cpu": _cpu() - start, "rules": sorted(found),
              "grades": "grade" in getattr(item, "fixturenames", ())}
    with open(os.path.join(os.environ[VARIABLE], f"{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
    return result


# --- as a script -----------------------------------------------------------------------------

def measure(modules: list[str], workers: int) -> list[dict]:
    out = tempfile.mkdtemp(prefix="rule-samples-")
    env = {**os.environ, VARIABLE: out,
           "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "-p", "rule_samples", "-q", "-p", "no:cacheprovider",
               "-m", "not arithmetic", *(["-n", str(workers), "--dist", "loadfile"] if workers > 1 else ["-n", "0"]),
               *modules]
    subprocess.run(command, cwd=ROOT, env=env, check=False)
    return [json.loads(line) for path in glob.glob(os.path.join(out, "*.jsonl")) for line in open(path)]


def cover(records: list[dict], assignment_of: dict[str, str]) -> list[dict]:
    """Tests that together break every (assignment, rule) pair any of them breaks, cheap first."""
    def pairs(r):
        return {(assignment_of[r["node"].split("::")[0]], rule) for rule in r["rules"]}

    breaking = [r for r in records if r["rules"]]
    needed, covered, chosen = set().union(*map(pairs, breaking)) if breaking else set(), set(), []
    while covered != needed:
        best = min((r for r in breaking if pairs(r) - covered),
                   key=lambda r: (r["cpu"] + 0.2) / len(pairs(r) - covered))
        chosen.append(best)
        covered |= pairs(best)
    return chosen


def main() -> int:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from older_stack import HONEST_DESIGNS, RULE_SAMPLES, on_the_older_stack

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="test modules (default: those tests/older_stack.py names)")
    parser.add_argument("-n", type=int, default=3, help="pytest-xdist workers (default 3)")
    args = parser.parse_args()
    named = on_the_older_stack()
    modules = args.modules or sorted({"tests/" + node.split("::")[0] for node in named})
    assignment_of = {node.split("::")[0]: a for a, samples in RULE_SAMPLES.items() for node in samples.values()}
    records = [r for r in measure(modules, args.n) if r["node"].split("::")[0] in assignment_of]
    graded = [r for r in records if r["grades"] or r["node"] in named]
    kept = [r for r in graded if r["node"] in named]
    print(f"\n1. {len(records)} tests, {sum(r['cpu'] for r in records):.0f} CPU-s; of the {len(graded)} that "
          f"grade corpus files, tests/older_stack.py names {len(kept)}: {sum(r['cpu'] for r in kept):.0f} CPU-s")
    sampled = {(a, rule) for a, samples in RULE_SAMPLES.items() for rule in samples}
    best = {}
    for r in cover(graded, assignment_of):
        for rule in r["rules"]:
            best.setdefault((assignment_of[r["node"].split("::")[0]], rule), r)
    print("\n2. (assignment, rule) pairs a corpus test breaks on this stack:")
    for pair in sorted(best):
        where = "sampled" if pair in sampled else "NOT SAMPLED; the cheapest test that breaks it: " + best[pair]["node"]
        print(f"   {pair[0]:12} {pair[1]}  {where}")
    honest = sorted(r["node"] for r in graded if not r["rules"] and r["node"] not in HONEST_DESIGNS)
    print(f"\n3. honest designs (no problem found) not in HONEST_DESIGNS: {honest or 'none'}")
    ran = {r["node"] for r in records}
    unrun = sorted(n for n in named if n.split("::")[0] in {m.removeprefix("tests/") for m in modules} and n not in ran)
    if unrun:
        print(f"   named in tests/older_stack.py but not run: {unrun}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
