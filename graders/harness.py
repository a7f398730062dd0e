"""Grade one submission: export in one child process, judge the artifacts in another.

The grading process never runs student code, nor programs compiled from it:
1. The export worker (`assignments.export_worker`: time and memory limits, no network,
   the kit's hidden folders masked) runs the submission and writes one serialized
   `jax.export` artifact per hidden case. It never sees input values.
2. The judge worker (`graders.judge_worker`) compiles each artifact on the case's mesh,
   reads the compiled HLO, runs it on hidden inputs and compares with the float64
   reference. A compiled program that loops forever or exhausts memory costs one case.
Either worker that hangs or dies is restarted for the cases left (`graders.sandbox`).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from assignments.contract import Assignment, Case, Part, case_request
from assignments.contracts import get_assignment
from assignments.evaluate import CaseResult
from assignments.hlo import ProgramAnalysis

from .hidden import HIDDEN_SEED, hidden_cases, hidden_inputs
from .results import PartResult, SubmissionResult
from .sandbox import python_command, run_worker


@dataclass(frozen=True)
class Limits:
    """Resource limits for the worker processes."""

    cell_timeout: float = 60.0
    """Seconds one notebook cell (or a .py module) may run."""
    case_timeout: float = 60.0
    """Seconds tracing and exporting one case may take."""
    stall_timeout: float = 120.0
    """Seconds the export worker may go without progress before it is killed."""
    run_timeout: float = 60.0
    """Seconds compiling and running one case's program may take."""
    memory_bytes: int = 8 * 2**30
    """Address-space limit of each worker."""
    isolate: bool = True
    """Run workers without network, and the export worker with the kit's folders masked,
    where the OS allows (Linux namespaces)."""


def case_id(part: Part, index: int) -> str:
    return f"{part.name}__{index}"


def selected_assignment(name: str, only: list[str] | None) -> Assignment:
    """The assignment, restricted to the functions in `only` when given."""
    assignment = get_assignment(name)
    if not only:
        return assignment
    return Assignment(assignment.name, assignment.title,
                      tuple(assignment.part(n) for n in only), assignment.written)


def _worker_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JAX_", "XLA_"))}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
    return env


def judge_case(assignment: Assignment, part: Part, case: Case, export: dict, seed: int,
               timings: dict[str, float] | None = None) -> CaseResult:
    """Compile, inspect, run and compare one exported case (adding phase times to `timings`).

    Runs in the judge worker: it executes a program compiled from student code."""
    import jax

    from assignments.evaluate import evaluate_compiled, evaluate_eager_report, make_mesh, place

    timings = {} if timings is None else timings
    if export.get("status") != "ok":
        return CaseResult.failed(case, export.get("message") or "no artifact was produced")
    if part.eager:
        return evaluate_eager_report(part, case, make_mesh(case.mesh, part.axis_types),
                                     export.get("report") or {})
    t0 = time.perf_counter()
    try:
        with open(export["file"], "rb") as f:
            exported = jax.export.deserialize(bytearray(f.read()))
        mesh = make_mesh(case.mesh, part.axis_types)
        arrays = hidden_inputs(assignment, part, case, seed)
        compiled = jax.jit(exported.call).lower(*place(arrays, part, mesh)).compile()
    except Exception as e:
        return CaseResult.failed(case, f"the exported program could not be compiled: "
                                       f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
    t1 = time.perf_counter()
    result = evaluate_compiled(part, case, mesh, compiled, exported.mlir_module(), arrays)
    timings["judge: deserialize and compile"] = timings.get("judge: deserialize and compile", 0) + t1 - t0
    timings["judge: inspect, run and compare"] = (timings.get("judge: inspect, run and compare", 0)
                                                  + time.perf_counter() - t1)
    return result


def grade_submission(submission: str, assignment_name: str, *, limits: Limits = Limits(),
                     seed: int = HIDDEN_SEED, only: list[str] | None = None,
                     keep_artifacts: str | None = None) -> SubmissionResult:
    """Grade one `.ipynb` or `.py` submission against an assignment's hidden cases.

    With `keep_artifacts`, the exported artifacts (`<function>__<case>.jaxexport`) are also
    copied into that folder (e.g. for `graders.distributed`)."""
    assignment = selected_assignment(assignment_name, only)
    cases = hidden_cases(assignment)
    jobs = [(part, i, case, case_id(part, i))
            for part in assignment.parts for i, case in enumerate(cases[part.name])]
    ids = [j[3] for j in jobs]
    timings: dict[str, float] = {}
    problems: list[str] = []
    env = _worker_env()
    with tempfile.TemporaryDirectory(prefix="grade-") as work:
        artifacts = os.path.join(work, "artifacts")
        os.makedirs(artifacts)
        if not os.path.exists(submission):
            exports = {i: {"status": "error", "message": f"no submission file at {submission}"} for i in ids}
            problems.append(f"no submission file at {submission}")
        else:
            t0 = time.perf_counter()
            # A private copy: the worker cannot see the kit's folders, nor other submissions.
            copy = os.path.join(work, "submission" + os.path.splitext(submission)[1])
            shutil.copyfile(submission, copy)
            export_request = {
                "submission": copy, "out_dir": artifacts, "devices": 8,
                "cell_timeout": limits.cell_timeout, "case_timeout": limits.case_timeout,
                "memory_bytes": limits.memory_bytes,
                "parts": [{"name": p.name, "signature": p.signature, "num_args": len(p.args),
                           "statics": list(p.statics), "eager": p.eager,
                           "takes_mesh": p.takes_mesh,
                           "cases": [case_request(p, c, case_id(p, i)) for i, c in enumerate(cases[p.name])]}
                          for p in assignment.parts],
            }
            run = run_worker(python_command("assignments.export_worker:main"), export_request, ids,
                             stall_timeout=limits.stall_timeout, memory_bytes=limits.memory_bytes,
                             isolate=limits.isolate, mask=True, env=env, cwd=work)
            exports = run.results
            if keep_artifacts:
                shutil.copytree(artifacts, keep_artifacts, dirs_exist_ok=True)
            for event in run.events:
                if event["event"] == "loaded" and isinstance(event.get("problems"), list):
                    problems = [str(p) for p in event["problems"]]
                    timings["export: run the submission"] = float(event.get("run_submission_s") or 0)
                if event["event"] == "finished":
                    timings["export: trace and export"] = (timings.get("export: trace and export", 0)
                                                           + float(event.get("export_s") or 0))
                if event["event"] == "died":
                    problems.append(event["message"])
            timings["export: start Python, import JAX"] = (
                time.perf_counter() - t0 - timings.get("export: run the submission", 0)
                - timings.get("export: trace and export", 0))

        # The artifact of a case is where the parent says, whatever the worker claimed.
        judge_jobs, results = [], {}
        for part, i, case, cid in jobs:
            export = exports.get(cid) or {"status": "error", "message": "no artifact was produced"}
            export = {"status": export.get("status"), "message": export.get("message"),
                      "report": export.get("report"), "file": os.path.join(artifacts, f"{cid}.jaxexport")}
            if export["status"] == "ok" and (part.eager or os.path.exists(export["file"])):
                judge_jobs.append({"id": cid, "part": part.name, "index": i, "export": export})
            else:
                results[cid] = CaseResult.failed(case, export["message"] or "no artifact was produced")
        if judge_jobs:
            t0 = time.perf_counter()
            judge_request = {"assignment": assignment_name, "only": only, "seed": seed,
                             "memory_bytes": limits.memory_bytes, "jobs": judge_jobs}
            run = run_worker(python_command("graders.judge_worker:main"), judge_request,
                             [j["id"] for j in judge_jobs], stall_timeout=limits.run_timeout,
                             memory_bytes=limits.memory_bytes, isolate=limits.isolate, mask=False,
                             env=env, cwd=work)
            by_id = {cid: case for _, _, case, cid in jobs}
            for cid, event in run.results.items():
                if "values_ok" in event:
                    analysis = event.get("analysis")
                    results[cid] = CaseResult(
                        by_id[cid], bool(event["values_ok"]), bool(event["rule_ok"]),
                        [str(p) for p in event.get("problems", [])],
                        ProgramAnalysis.from_json(analysis) if analysis else None)
                else:  # the judge died on this case: the compiled program hung or blew up
                    results[cid] = CaseResult.failed(
                        by_id[cid], f"running the compiled program: {event.get('message')}")
            judge_time = time.perf_counter() - t0
            for event in run.events:
                if event["event"] == "finished":
                    for phase, seconds in (event.get("timings") or {}).items():
                        timings[phase] = timings.get(phase, 0) + float(seconds)
            timings["judge: start Python, import JAX"] = judge_time - sum(
                v for k, v in timings.items() if k.startswith("judge: ") and "start" not in k)

    parts = [PartResult(part.name, part.points,
                        [results[case_id(part, i)] for i in range(len(cases[part.name]))])
             for part in assignment.parts]
    if problems:
        for p in parts:
            if not any(c.values_ok for c in p.cases):
                p.note = "while running your submission: " + "; ".join(problems)
    return SubmissionResult(assignment.name, os.path.basename(submission), parts, problems, timings)
