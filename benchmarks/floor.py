"""The floor of grading one submission: what it costs with nothing but the work itself.

    python benchmarks/floor.py ASSIGNMENT [SUBMISSION.py]    # prints one JSON line

One unsandboxed Python process (timed from outside, so JAX's start-up counts, as it does for
the kit) imports the submission as a module (default: the solution), compiles each distinct
program once (`jax.jit` of the function on its abstract inputs: the same program the kit
exports, without serializing it) with the judges' XLA flags, and runs and judges every
hidden case with the graders' own `evaluate_compiled` on the graders' own hidden inputs
(`graders.harness._jobs`). The eagerly graded part (warmup's `place`) is called and judged
as the kit does. No sandbox, no export, no second process, no cache: whatever the kit takes
beyond this is its overhead (`benchmarks/course_grading.py` prints the ratio).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def floor_environment() -> dict:
    """This process's environment with the judges' XLA flags (LLVM -O0, 8 CPU devices)."""
    from graders.sandbox import XLA_FLAGS

    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    return {**env, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": XLA_FLAGS}


def _module(path: str):
    spec = importlib.util.spec_from_file_location("floor_submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grade(assignment_name: str, path: str) -> dict:
    """Compile each distinct program once, run and judge every hidden case."""
    from assignments.devices import setup_devices

    setup_devices()
    import jax

    from assignments.contract import case_request
    from assignments.contracts import get_assignment
    from assignments.evaluate import eager_report, evaluate_compiled, evaluate_eager_report, make_mesh, place
    from graders.harness import _jobs
    from graders.hidden import grading_secret, hidden_inputs
    from graders.sandboxed.export import Exporter

    assignment = get_assignment(assignment_name)
    module = _module(path)
    abstract = Exporter()  # the abstract inputs the export worker builds, nothing else of it
    compiled: dict[str, tuple] = {}
    passed = total = 0
    for job in _jobs(assignment, grading_secret()):
        part, case = job.part, job.case
        fn = getattr(module, part.name)
        mesh = make_mesh(case.mesh, part.axis_types)
        arrays = hidden_inputs(assignment, part, case, job.seed)
        if part.eager:
            report = eager_report(fn, mesh, dict(case.statics), arrays)
            result = evaluate_eager_report(part, case, mesh, report, arrays)
        else:
            request = case_request(part, case, job.id)
            signature = json.dumps([part.name, {k: v for k, v in request.items() if k != "id"}], sort_keys=True)
            if signature not in compiled:
                specs = [abstract.abstract(mesh, a) for a in request["args"]]
                lowered = jax.jit(lambda *args: fn(*args, **part.call_kwargs(mesh, case.statics))).lower(*specs)
                compiled[signature] = (lowered.compile(), lowered.as_text())
            program, text = compiled[signature]
            result = evaluate_compiled(part, case, mesh, program, text, arrays, show_values=False)
        passed += result.passed
        total += 1
    return {"cases": total, "passed": passed, "programs": len(compiled)}


def main() -> int:
    assignment = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "solutions", f"{assignment}.py")
    started = time.perf_counter()
    os.environ.update(floor_environment())  # before JAX starts: XLA reads them once
    print(json.dumps({**grade(assignment, path), "in_process_s": time.perf_counter() - started}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
