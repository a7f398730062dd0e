"""What XLA's compile flags save on the judge's compilation, without changing what it reads.

    python benchmarks/xla_compile_flags.py [--assignments problem2 problem3] [--repeats 2]

For each assignment, compiles every hidden case of the solution in a fresh process under each
flag setting, alternating (these machines are noisy), and prints the seconds spent compiling
and a digest of the HLO analyses (collectives, axes, bytes, loop counts, largest values): a
flag is usable by the graders only if its digest equals the default's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = {"default": "", "backend O0": "--xla_backend_optimization_level=0",
            "O0 + no expensive LLVM passes": "--xla_backend_optimization_level=0 "
                                             "--xla_llvm_disable_expensive_passes=true"}

CHILD = r'''
import functools, hashlib, importlib.util, json, os, sys, time
sys.path.insert(0, ROOT)
os.environ.setdefault("KIT_GRADING_SECRET", "benchmark")
import assignments
assignments.setup_devices(8)
import jax
from assignments.contracts import get_assignment
from assignments.evaluate import make_mesh, place
from assignments.hlo import analyze
from graders.hidden import case_seed, hidden_cases, hidden_inputs
name = sys.argv[1]
spec = importlib.util.spec_from_file_location("solution", os.path.join(ROOT, "solutions", name + ".py"))
solution = importlib.util.module_from_spec(spec); spec.loader.exec_module(solution)
a = get_assignment(name); cases = hidden_cases(a); lowered = []
for p in a.parts:
    if p.eager:
        continue
    for i, c in enumerate(cases[p.name]):
        mesh = make_mesh(c.mesh, p.axis_types)
        arrays = hidden_inputs(a, p, c, case_seed(name, p.name, i))
        f = jax.jit(functools.partial(getattr(solution, p.name), **p.call_kwargs(mesh, c.statics)))
        lowered.append((mesh, f.lower(*place(arrays, p, mesh))))
started = time.perf_counter(); analyses = []
for mesh, l in lowered:
    analyses.append(analyze(l.compile(), mesh).to_json())
digest = hashlib.sha256(json.dumps(analyses, sort_keys=True, default=str).encode()).hexdigest()[:12]
print(json.dumps({"seconds": time.perf_counter() - started, "cases": len(lowered), "digest": digest}))
'''


def measure(assignment: str, flags: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count=8 {flags}".strip()}
    proc = subprocess.run([sys.executable, "-c", CHILD.replace("ROOT", repr(ROOT)), assignment],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignments", nargs="+", default=["problem2", "problem3"])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    for assignment in args.assignments:
        runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
        for _ in range(args.repeats):
            for name, flags in SETTINGS.items():
                runs[name].append(measure(assignment, flags))
        base = statistics.median(r["seconds"] for r in runs["default"])
        print(f"{assignment}: compiling {runs['default'][0]['cases']} cases, median of {args.repeats}")
        for name, results in runs.items():
            seconds = statistics.median(r["seconds"] for r in results)
            same = {r["digest"] for r in results} == {runs["default"][0]["digest"]}
            print(f"  {name:<32} {seconds:7.2f} s  {seconds / base:5.2f}x  analysis "
                  f"{'identical' if same else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
