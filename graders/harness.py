"""Grade one submission: export in a child process, then judge the artifacts here.

The parent never runs student code. It starts `assignments.export_worker` in a child
process (time and memory limits, a scratch folder, `graders`/`solutions` blocked), reads
the serialized `jax.export` artifacts it writes, and for each one compiles it on the
case's mesh, reads the compiled HLO, runs it on hidden inputs and compares with the
float64 reference. A child that hangs or crashes costs only the case it was working on:
the parent starts a new child for the cases that remain.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import jax

from assignments.contract import Assignment, Case, Part, case_request
from assignments.contracts import get_assignment
from assignments.devices import setup_devices
from assignments.evaluate import (
    CaseResult, evaluate_compiled, evaluate_eager_report, make_mesh, place,
)

from .hidden import HIDDEN_SEED, hidden_cases, hidden_inputs
from .results import PartResult, SubmissionResult

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Limits:
    """Resource limits for the child process that runs student code."""

    cell_timeout: float = 60.0
    """Seconds one notebook cell (or a .py module) may run."""
    case_timeout: float = 60.0
    """Seconds tracing and exporting one case may take."""
    stall_timeout: float = 120.0
    """Seconds without progress after which the child is killed."""
    memory_bytes: int = 8 * 2**30
    """Address-space limit of the child."""
    isolate_network: bool = True
    """Run the child in a network namespace of its own (no network) where the OS allows it."""


@functools.lru_cache(maxsize=1)
def _no_network_prefix() -> tuple[str, ...]:
    """`unshare -n` when this machine lets us make a network namespace, else nothing."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return (unshare, "-n")
    return ()


def _case_id(part: Part, index: int) -> str:
    return f"{part.name}__{index}"


def _request(assignment: Assignment, cases: dict[str, list[Case]], submission: str,
             out_dir: str, limits: Limits, skip: list[str]) -> dict:
    parts = []
    for part in assignment.parts:
        parts.append({
            "name": part.name, "signature": part.signature, "num_args": len(part.args),
            "statics": list(part.statics), "eager": part.eager,
            "cases": [case_request(part, case, _case_id(part, i))
                      for i, case in enumerate(cases[part.name])],
        })
    return {"submission": os.path.abspath(submission), "out_dir": out_dir, "devices": 8,
            "cell_timeout": limits.cell_timeout, "case_timeout": limits.case_timeout,
            "memory_bytes": limits.memory_bytes,
            "parts": parts, "skip": skip}


def _read_events(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    events = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line cut short by a kill
    return events


def run_child(assignment: Assignment, cases: dict[str, list[Case]], submission: str,
              work: str, limits: Limits, timings: dict[str, float]) -> tuple[dict[str, dict], list[str]]:
    """Export every case; returns ({case id: event}, problems while loading).

    Adds the child's own phase times to `timings`."""
    events_path = os.path.join(work, "events.jsonl")
    all_ids = [_case_id(p, i) for p in assignment.parts for i in range(len(cases[p.name]))]
    results: dict[str, dict] = {}
    load_problems: list[str] = []
    scratch = os.path.join(work, "cwd")
    os.makedirs(scratch, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JAX_", "XLA_"))}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
    bootstrap = (f"import sys; sys.path.insert(0, {REPO_ROOT!r}); "
                 f"from assignments.export_worker import main; sys.exit(main(sys.argv[1]))")
    for attempt in range(len(all_ids) + 1):
        pending = [i for i in all_ids if i not in results]
        if not pending:
            break
        request_path = os.path.join(work, f"request{attempt}.json")
        with open(request_path, "w") as f:
            json.dump(_request(assignment, cases, submission, work, limits, list(results)), f)
        start_line = len(_read_events(events_path))
        proc = subprocess.Popen(
            [*(_no_network_prefix() if limits.isolate_network else ()),
             sys.executable, "-I", "-c", bootstrap, request_path], cwd=scratch, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so a kill takes its children too
        )
        last_size, last_change = -1, time.monotonic()
        while proc.poll() is None:
            size = os.path.getsize(events_path) if os.path.exists(events_path) else 0
            if size != last_size:
                last_size, last_change = size, time.monotonic()
            elif time.monotonic() - last_change > limits.stall_timeout:
                os.killpg(proc.pid, 9)
                proc.wait()
                break
            time.sleep(0.05)
        events = _read_events(events_path)[start_line:]
        started = None
        for event in events:
            kind = event.get("event")
            if kind == "unreadable":
                return {i: {"status": "error", "message": event["message"]} for i in all_ids}, [event["message"]]
            if kind == "loaded" and attempt == 0:
                load_problems = event.get("problems", [])
                timings["child: run the submission"] = event.get("run_submission_s", 0.0)
            if kind == "finished":
                timings["child: trace and export"] = timings.get("child: trace and export", 0) + event.get("export_s", 0)
            if kind == "start":
                started = event["id"]
            if kind == "case":
                results[event["id"]] = event
                started = None
        if any(e.get("event") == "finished" for e in events):
            continue
        # The child died or was killed: blame the case it was on, or every case left if it
        # never got to one (the submission itself hangs or crashes while loading).
        why = (f"stopped after {limits.stall_timeout:g} s without progress (an infinite loop?)"
               if proc.returncode in (-9, None) else
               f"the process running the submission crashed (exit code {proc.returncode}; "
               f"out of memory? the limit is {limits.memory_bytes / 2**30:g} GiB)")
        if started is not None:
            results[started] = {"status": "error", "message": why}
        else:
            for i in pending:
                results[i] = {"status": "error", "message": f"the submission could not be loaded: {why}"}
            if not any(e.get("event") == "loaded" for e in events):
                load_problems.append(f"the submission could not be loaded: {why}")
    return results, load_problems


def judge_case(assignment: Assignment, part: Part, case: Case, event: dict, seed: int,
               timings: dict[str, float] | None = None) -> CaseResult:
    """Compile, inspect, run and compare one exported case (adding phase times to `timings`)."""
    timings = {} if timings is None else timings
    t0 = time.perf_counter()
    if event.get("status") != "ok":
        return CaseResult.failed(case, event.get("message", "no artifact was produced"))
    if part.eager:
        return evaluate_eager_report(part, case, make_mesh(case.mesh), event["report"])
    try:
        with open(event["file"], "rb") as f:
            exported = jax.export.deserialize(bytearray(f.read()))
        mesh = make_mesh(case.mesh)
        arrays = hidden_inputs(assignment, part, case, seed)
        compiled = jax.jit(exported.call).lower(*place(arrays, part, mesh)).compile()
    except Exception as e:
        return CaseResult.failed(case, f"the exported program could not be compiled: "
                                       f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
    t1 = time.perf_counter()
    result = evaluate_compiled(part, case, mesh, compiled, exported.mlir_module(), arrays)
    timings["parent: deserialize and compile"] = timings.get("parent: deserialize and compile", 0) + t1 - t0
    timings["parent: inspect, run and compare"] = (timings.get("parent: inspect, run and compare", 0)
                                                   + time.perf_counter() - t1)
    return result


def grade_submission(submission: str, assignment_name: str, *, limits: Limits = Limits(),
                     seed: int = HIDDEN_SEED, only: list[str] | None = None) -> SubmissionResult:
    """Grade one `.ipynb` or `.py` submission against an assignment's hidden cases."""
    setup_devices(8)
    assignment = get_assignment(assignment_name)
    if only:
        assignment = Assignment(assignment.name, assignment.title,
                                tuple(assignment.part(n) for n in only), assignment.written)
    cases = hidden_cases(assignment)
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="grade-") as work:
        if not os.path.exists(submission):
            events, problems = {}, [f"no submission file at {submission}"]
        else:
            t0 = time.perf_counter()
            events, problems = run_child(assignment, cases, submission, work, limits, timings)
            timings["child: start Python, import JAX"] = (
                time.perf_counter() - t0 - timings.get("child: run the submission", 0)
                - timings.get("child: trace and export", 0))
        t0 = time.perf_counter()
        parts = []
        for part in assignment.parts:
            results = [
                judge_case(assignment, part, case, events.get(_case_id(part, i), {}), seed + i, timings)
                for i, case in enumerate(cases[part.name])
            ]
            parts.append(PartResult(part.name, part.points, results))
    if problems:
        for p in parts:
            if not any(c.values_ok for c in p.cases):
                p.note = "while running your submission: " + "; ".join(problems)
    return SubmissionResult(assignment.name, os.path.basename(submission), parts, problems, timings)
