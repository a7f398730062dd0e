"""The judge: compile, inspect, run and compare exported artifacts.

It runs programs made by student code, which may loop forever, exhaust memory, or be any
bytes a submission chose; so it runs in the same sandbox as the export worker
(`graders.sandbox`), with no access to the graders or the hidden secret. It reads a header
line, then one job per line (a case's artifact, or an eager part's report, and its hidden
inputs) as the parent sends them, and answers each with one JSON line
(`graders.sandboxed.protocol`), until its stdin closes. It says "ready" when JAX has started:
the parent gives a job only to a judge that is ready and idle, so a judge that starts late
takes what is left instead of holding jobs the others could have judged. Its messages never
quote a value of the hidden inputs, and it reports no array data.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import traceback
import time

ALLOWED_CUSTOM_CALLS_EXTRA = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                        "shape_assertion", "annotate_device_placement"})


def foreign_custom_calls(ops: frozenset[str]) -> list[str]:
    """Custom calls in a program that `jax.export` would not have produced by itself (an
    artifact is bytes the submission chose, so it is checked before it is compiled)."""
    from jax._src.export import _export

    allowed = set(_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE) | ALLOWED_CUSTOM_CALLS_EXTRA
    return sorted(op.split(":", 1)[1] for op in ops
                  if op.startswith("custom_call:") and op.split(":", 1)[1] not in allowed)


_COMPILED: dict = {}
"""Programs compiled in this process, by artifact and placement: cases that differ only in
their input values (problem2's routings) share one compilation."""


def compile_artifact(part, case, artifact: bytes, arrays):
    """(The compiled program, its StableHLO text, the mesh), compiled once per artifact,
    mesh and input placement. Raises ValueError for a program the graders do not run."""
    import jax

    from assignments.lowered import lowered_program
    from assignments.evaluate import make_mesh, place

    key = (hashlib.sha256(artifact).hexdigest(), tuple(case.mesh), part.axis_types,
           tuple((a.shape, str(a.dtype)) for a in jax.tree.leaves(arrays)))
    if key not in _COMPILED:
        exported = jax.export.deserialize(bytearray(artifact))
        text = exported.mlir_module()
        foreign = foreign_custom_calls(lowered_program(text).ops)
        if foreign:
            raise ValueError(f"the exported program calls {', '.join(foreign)[:200]}, which the "
                             f"graders do not run")
        mesh = make_mesh(case.mesh, part.axis_types)
        compiled = jax.jit(exported.call).lower(*place(arrays, part, mesh)).compile()
        _COMPILED[key] = (compiled, text, mesh)
    return _COMPILED[key]


def judge_artifact(part, case, artifact: bytes, arrays, timings: dict):
    """Compile (or reuse), inspect, run and compare one exported case."""
    from assignments.contract import CHECKS, CaseResult, check_call
    from assignments.evaluate import evaluate_compiled

    t0 = time.perf_counter()
    try:
        compiled, text, mesh = compile_artifact(part, case, artifact, arrays)
    except ValueError as e:
        return CaseResult.failed(case, CHECKS["E003"].problem(str(e)))
    except Exception as e:  # XLA refused the program on this mesh: the student can see it happen
        return CaseResult.failed(case, CHECKS["E003"].problem(
            f"the exported program could not be compiled: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:300] if str(e) else ''}; to see it, run {check_call(part, case)}"))
    t1 = time.perf_counter()
    result = evaluate_compiled(part, case, mesh, compiled, text, arrays, show_values=False)
    timings["judge: deserialize and compile"] = timings.get("judge: deserialize and compile", 0) + t1 - t0
    timings["judge: inspect, run and compare"] = (timings.get("judge: inspect, run and compare", 0)
                                                  + time.perf_counter() - t1)
    return result


def judge_job(assignment, job: dict, timings: dict):
    from assignments.evaluate import evaluate_eager_report, make_mesh

    from .protocol import decode_array, decode_bytes, decode_tree

    part = assignment.part(job["part"])
    case = _case_of(job)
    arrays = [decode_tree(x) for x in job["inputs"]]
    if part.eager:
        report = dict(job["report"])
        if "shards" in report:
            report["shards"] = [{**s, "data": decode_array(s["data"])} for s in report["shards"]]
        return evaluate_eager_report(part, case, make_mesh(case.mesh, part.axis_types), report, arrays)
    return judge_artifact(part, case, decode_bytes(job["artifact"]), arrays, timings)


def _case_of(job: dict):
    from assignments.contract import Case

    return Case(tuple(job["case"]["mesh"]), job["case"]["sizes"], job["case"]["statics"])


def graders_failed(assignment, job: dict, error: Exception):
    """The verdict on a case the judge's own code failed on (an exception outside the program it
    judges, which reports its compile and run errors itself): failed, not cached (`ran` False,
    so a regrade after the kit is fixed judges it again), with a message that blames the kit."""
    from assignments.contract import CHECKS, CaseResult

    case = _case_of(job)
    first = (str(error).strip().splitlines() or [""])[0][:200]
    return CaseResult.failed(case, CHECKS["E005"].problem(
        f"the graders could not judge this case ({type(error).__name__}: {first}): a fault of the grading "
        f"kit, not of your code; tell your instructor, who can regrade once it is fixed"))


def case_event(job_id: str, result) -> dict:
    """A judged case as the judge reports it (`graders.sandboxed.protocol`)."""
    return {"event": "case", "id": job_id, "values_ok": result.values_ok, "rule_ok": result.rule_ok,
            "problems": [p.to_json() for p in result.problems], "ran": result.ran,
            "analysis": None if result.analysis is None else result.analysis.to_json()}


def main() -> int:
    from .protocol import event_channel, read_request

    emit = event_channel(silence=(1,))  # XLA's own chatter must not corrupt the event stream
    from assignments.contracts import get_assignment
    from assignments.devices import setup_devices

    # JAX and its devices start before the header is read: the grader starts judges while
    # the export still runs, and their start-up overlaps it.
    setup_devices()  # the runtime's device count (assignments.devices.DEFAULT_DEVICES)
    emit(event="ready")
    header = read_request(sys.stdin.readline(), "judge")
    assignment = get_assignment(header["assignment"])
    timings: dict[str, float] = {}
    for line in sys.stdin:  # one job per line, as the export produces them, until EOF
        job = json.loads(line)
        emit(event="start", id=job["id"])
        try:
            result = judge_job(assignment, job, timings)
        except Exception as e:  # the kit's own judging failed: say so, never blame the submission
            traceback.print_exc()
            result = graders_failed(assignment, job, e)
        emit(**case_event(job["id"], result))
    emit(event="finished", timings=timings)
    os._exit(0)  # every event is flushed: skip the interpreter's teardown (0.1-0.3 s with JAX loaded)


if __name__ == "__main__":
    sys.exit(main())
