"""Grade one submission: export in one sandboxed worker, judge the artifacts in another.

The grading process never runs student code, nor programs compiled from it:
1. The export worker (`assignments.export_worker`) runs the submission in the sandbox
   (`graders.sandbox`) and sends back one serialized `jax.export` artifact per hidden case.
   It never sees input values (except an eagerly graded part's own inputs).
2. The judges (`assignments.judge_worker`, two side by side), each in a sandbox of its own,
   compile each artifact on the case's mesh, read the compiled HLO, run it on the hidden
   inputs this process sends them and compare with the float64 reference. They start at the
   export's first artifact, so that their start-up overlaps the export.
This process never loads JAX (only the workers need it).
Every event from either is validated (`assignments.protocol`); a worker that hangs, dies or
breaks the protocol costs the case it was on, and the submission's budget bounds the whole.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

from assignments.contract import Assignment, CaseResult, Part, case_request
from assignments.contracts import get_assignment
from assignments.protocol import (ProtocolError, encode_array, encode_bytes, encode_tree, read_event,
                                  request_text)

from . import verdicts
from .hidden import case_seed, grading_secret, hidden_cases, hidden_inputs
from .results import PartResult, SubmissionResult
from .sandbox import (Deadlines, Resources, Slot, choose_isolation, python_command, run_worker, start_worker,
                      stop_worker)

MAX_SUBMISSION_BYTES = 32 * 2**20
"""A larger file is not run (notebooks with big outputs stay far below this)."""
JUDGE_COMMAND = python_command("assignments.judge_worker:main")
CASE_GRACE = 15.0
"""Seconds past a case's own time limit before the supervisor kills its worker (at most the
limit itself again): the worker's own alarm should fire first, with a better message."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one grading (every command line takes its defaults from here)."""

    cell_timeout: float = 60.0
    """Seconds one notebook cell (or a .py module) may run."""
    case_timeout: float = 60.0
    """Seconds tracing and exporting one case may take."""
    stall_timeout: float = 120.0
    """Seconds the export worker may go without any progress before it is killed."""
    run_timeout: float = 60.0
    """Seconds compiling and running one case's program may take."""
    submission_timeout: float = 900.0
    """Seconds the whole grading of one submission may take, both workers together."""
    memory_bytes: int = 8 * 2**30
    """Address-space limit of each worker process."""
    tmp_bytes: int = 512 * 2**20
    """Size of the sandbox's /tmp and of its scratch folder."""
    max_strikes: int = 2
    """Cases of one function that may time out or crash before its others are not run."""
    judges: int = 2
    """Judge workers compiling a submission's artifacts side by side (one per core helps; a
    batch already grading one submission per core needs only one)."""
    sandbox: str = "auto"
    """"auto" (bubblewrap, refusing to grade without it) or "none" (no isolation at all:
    only for trusted code, e.g. the kit's own solutions on a machine without bubblewrap)."""

    @property
    def resources(self) -> Resources:
        return Resources(memory_bytes=self.memory_bytes, tmp_bytes=self.tmp_bytes,
                         cpu_seconds=int(2 * self.submission_timeout) + 60)


def case_id(part: Part, index: int) -> str:
    return f"{part.name}__{index}"


def selected_assignment(name: str, only: list[str] | None) -> Assignment:
    """The assignment, restricted to the functions in `only` when given."""
    assignment = get_assignment(name)
    if not only:
        return assignment
    return Assignment(assignment.name, assignment.title,
                      tuple(assignment.part(n) for n in only), assignment.written)


@dataclass
class _Job:
    part: Part
    index: int
    case: object
    id: str
    seed: int


def _read_submission(path: str) -> tuple[str | None, str | None]:
    """(The submission's text, or None; the problem reading it, or None)."""
    if not os.path.isfile(path):
        return None, f"no submission file at {path}"
    if os.path.getsize(path) > MAX_SUBMISSION_BYTES:
        return None, (f"the submission is larger than {MAX_SUBMISSION_BYTES // 2**20} MiB; clear "
                      f"the notebook's outputs (Edit > Clear Outputs of All Cells) and resubmit")
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace"), None


def _export(jobs: list[_Job], assignment: Assignment, path: str, text: str, limits: Limits,
            context: dict, on_result=None):
    parts = []
    for part in assignment.parts:
        cases = []
        for job in (j for j in jobs if j.part is part):
            request = case_request(part, job.case, job.id)
            if part.eager:  # called on concrete inputs: they must go in
                arrays = hidden_inputs(assignment, part, job.case, job.seed)
                request["inputs"] = [encode_tree(a) for a in arrays]
            cases.append(request)
        parts.append({"name": part.name, "signature": part.signature, "num_args": len(part.args),
                      "statics": list(part.statics), "eager": part.eager,
                      "takes_mesh": part.takes_mesh, "cases": cases})

    def request_for(skip):
        return request_text("export", submission_name=os.path.basename(path) if path.endswith(
            ".ipynb") else "submission.py", submission_text=text, devices=8,
            cell_timeout=limits.cell_timeout, case_timeout=limits.case_timeout, parts=parts, skip=skip)

    deadlines = Deadlines(stall=limits.stall_timeout,
                          case=limits.case_timeout + min(CASE_GRACE, limits.case_timeout),
                          end=context["end"])
    return run_worker(python_command("assignments.export_worker:main"), request_for,
                      [j.id for j in jobs], kind="export", deadlines=deadlines, on_result=on_result,
                      **context["worker"])


def _judge(jobs: list[_Job], exports: dict, assignment: Assignment, limits: Limits,
           context: dict) -> tuple[dict, list]:
    """Judge every exported case: (case id -> validated judge event, the judge's events).
    Cases judged before (the same artifact, case and inputs) come from `graders.verdicts`."""
    results, requests, keys = {}, [], {}
    for job in jobs:
        export = exports[job.id]
        if not job.part.eager:
            keys[job.id] = _verdict_key(assignment, job, export["artifact"])
            hit = verdicts.load(keys[job.id])
            if hit is not None:
                try:
                    line = json.dumps({**hit, "event": "case", "id": job.id}).encode()
                    results[job.id] = read_event(line, {job.id}, "judge")
                    continue
                except ProtocolError:
                    pass  # a stale or damaged entry: judge again
        requests.append(_judge_request(job, export, assignment))
    if not requests:
        return results, []
    deadlines = Deadlines(stall=limits.run_timeout + CASE_GRACE, case=limits.run_timeout,
                          end=context["end"])
    shares = _shares(requests, max(1, limits.judges))
    started = context["judges"].take(len(shares))

    def judge_share(share, ready):  # each judge with a uid of its own: sweeping one spares the other
        if ready is not None:
            uid, proc = ready
            return _run_judge(share, assignment, deadlines, {**context["worker"], "uid": uid}, proc)
        with Slot() as slot:
            return _run_judge(share, assignment, deadlines, {**context["worker"], "uid": slot.uid})

    with ThreadPoolExecutor(len(shares)) as pool:
        runs = list(pool.map(judge_share, shares, started))
    events = []
    for run in runs:
        for case_id_, event in run.results.items():
            if "values_ok" in event and case_id_ in keys:  # a verdict, not a timeout or a crash
                verdicts.store(keys[case_id_], {
                    "values_ok": event["values_ok"], "rule_ok": event["rule_ok"],
                    "problems": event["problems"],
                    "analysis": None if event["analysis"] is None else event["analysis"].to_json()})
        results.update(run.results)
        events += run.events
    return results, events


def _shares(requests: list[dict], n: int) -> list[list[dict]]:
    """`requests` split among `n` judges, each function's cases on one mesh kept together
    (cases that differ only in their input values share a compiled program), balancing the
    number of cases."""
    groups: dict[tuple, list[dict]] = {}
    for r in requests:
        groups.setdefault((r["part"], tuple(r["case"]["mesh"])), []).append(r)
    shares: list[list[dict]] = [[] for _ in range(min(n, len(groups)))]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(shares, key=len).extend(group)
    return shares


def _run_judge(requests: list[dict], assignment: Assignment, deadlines: Deadlines, worker: dict,
               started=None):
    def request_for(skip):
        return request_text("judge", assignment=assignment.name, jobs=requests, skip=skip)

    return run_worker(JUDGE_COMMAND, request_for, [r["id"] for r in requests], kind="judge",
                      deadlines=deadlines, started=started, **worker)


class _EarlyJudges:
    """Judge workers started while the export still runs (at its first artifact), each on a
    uid of its own: their Python, JAX and device start-up overlaps the export instead of
    following it. Those not needed in the end are stopped when the grading ends."""

    def __init__(self, count: int, worker: dict):
        self.count, self.worker = count, worker
        self.stack = ExitStack()
        self.ready: list[tuple[int | None, object]] = []
        self.started = False

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        try:
            for _ in range(self.count):
                uid = self.stack.enter_context(Slot()).uid
                proc = start_worker(JUDGE_COMMAND, resources=self.worker["resources"],
                                    isolation=self.worker["isolation"], uid=uid, cwd=self.worker["cwd"])
                self.stack.callback(stop_worker, proc, uid)  # runs before the slot's sweep
                self.ready.append((uid, proc))
        except (OSError, RuntimeError):
            pass  # no slot or process to spare now: the judges start after the export instead

    def take(self, n: int) -> list:
        """Up to `n` started judges (None where there is none), each handed out once."""
        taken, self.ready = self.ready[:n], self.ready[n:]
        return taken + [None] * (n - len(taken))

    def __enter__(self) -> "_EarlyJudges":
        return self

    def __exit__(self, *exc) -> None:
        self.stack.close()


def _judge_request(job: _Job, export: dict, assignment: Assignment) -> dict:
    arrays = hidden_inputs(assignment, job.part, job.case, job.seed)
    request = {"id": job.id, "part": job.part.name, "case": job.case.to_json(),
               "inputs": [encode_tree(a) for a in arrays]}
    if job.part.eager:
        report = dict(export["report"])
        if "shards" in report:
            report["shards"] = [{**s, "data": encode_array(s["data"])} for s in report["shards"]]
        request["report"] = report
    else:
        request["artifact"] = encode_bytes(export["artifact"])
    return request


def _case_result(job: _Job, event: dict) -> CaseResult:
    if "values_ok" in event:
        return CaseResult(job.case, event["values_ok"], event["rule_ok"], event["problems"],
                          event["analysis"])
    return CaseResult.failed(job.case, f"running the compiled program: {event.get('message')}")


def grade_submission(submission: str, assignment_name: str, *, limits: Limits = Limits(),
                     secret: bytes | None = None, only: list[str] | None = None,
                     keep_artifacts: str | None = None) -> SubmissionResult:
    """Grade one `.ipynb` or `.py` submission against an assignment's hidden cases (the
    cases only: `graders.run.grade` adds the custom checks of the pytest graders).

    With `keep_artifacts`, the exported artifacts (`<function>__<case>.jaxexport`) are also
    written into that folder (e.g. for `graders.distributed`)."""
    isolation = choose_isolation(limits.sandbox)
    assignment = selected_assignment(assignment_name, only)
    secret = grading_secret() if secret is None else secret
    cases = hidden_cases(assignment)
    jobs = [_Job(part, i, case, case_id(part, i), case_seed(assignment.name, part.name, i, secret))
            for part in assignment.parts for i, case in enumerate(cases[part.name])]
    timings: dict[str, float] = {}
    text, problem = _read_submission(submission)
    problems = [problem] if problem else []
    with Slot() as slot, tempfile.TemporaryDirectory(prefix="grade-") as work:
        worker = {"resources": limits.resources, "isolation": isolation, "uid": slot.uid,
                  "function_of": {j.id: j.part.name for j in jobs},
                  "max_strikes": limits.max_strikes, "cwd": work}
        with _EarlyJudges(max(1, limits.judges), worker) as judges:
            context = {"end": time.monotonic() + limits.submission_timeout, "worker": worker,
                       "judges": judges}
            started = time.perf_counter()
            exports = {}
            if text is not None:
                run = _export(jobs, assignment, submission, text, limits, context,
                              on_result=_start_judges_when_needed(jobs, assignment, judges))
                exports = run.results
                problems += _collect(run.events, timings)
            timings["export (all)"] = time.perf_counter() - started
            results, ready = _exported(jobs, exports, problem, keep_artifacts)
            if ready:
                started = time.perf_counter()
                judged_cases, events = _judge(ready, exports, assignment, limits, context)
                results.update({job.id: _case_result(job, judged_cases[job.id]) for job in ready})
                _collect(events, timings)
                timings["judge (all)"] = time.perf_counter() - started
    return _submission_result(assignment, submission, jobs, results, problems, timings, isolation)


def _start_judges_when_needed(jobs: list[_Job], assignment: Assignment, judges: _EarlyJudges):
    """The export's `on_result`: start the judges at the first case that will need one (an
    eager part's report, or an artifact whose verdict is not cached)."""
    by_id = {job.id: job for job in jobs}

    def on_result(event: dict) -> None:
        if judges.started or event["status"] != "ok":
            return
        job, artifact = by_id[event["id"]], event.get("artifact")
        if artifact is None or verdicts.load(_verdict_key(assignment, job, artifact)) is None:
            judges.start()

    return on_result


def _verdict_key(assignment: Assignment, job: _Job, artifact: bytes) -> str:
    return verdicts.key(assignment.name, job.part.name, job.case.to_json(), job.seed, artifact)


def _collect(events: list[dict], timings: dict) -> list[str]:
    """Add a worker's reported timings to `timings`; return the problems it reported."""
    problems = []
    for event in events:
        if event["event"] == "loaded":
            problems += event["problems"]
            timings["export: run the submission"] = event["run_submission_s"]
        elif event["event"] == "finished":  # several judges: their times add up
            for phase, seconds in event["timings"].items():
                timings[phase] = timings.get(phase, 0.0) + seconds
        elif event["event"] == "died":
            problems.append(event["message"])
    return problems


def _exported(jobs: list[_Job], exports: dict, problem: str | None, keep_artifacts: str | None):
    """(Results of the cases that produced no artifact, the jobs ready to be judged)."""
    results, ready = {}, []
    for job in jobs:
        export = exports.get(job.id) or {"status": "error", "message": problem or "no artifact was produced"}
        if export["status"] != "ok":
            results[job.id] = CaseResult.failed(job.case, export["message"] or "no artifact was produced")
            continue
        ready.append(job)
        if keep_artifacts and "artifact" in export:
            os.makedirs(keep_artifacts, exist_ok=True)
            with open(os.path.join(keep_artifacts, f"{job.id}.jaxexport"), "wb") as f:
                f.write(export["artifact"])
    return results, ready


def _submission_result(assignment, submission, jobs, results, problems, timings, isolation):
    parts = [PartResult(part.name, part.points, [results[j.id] for j in jobs if j.part is part])
             for part in assignment.parts]
    if problems:
        for p in parts:
            if not any(c.values_ok for c in p.cases):
                p.note = "while running your submission: " + "; ".join(problems)
    return SubmissionResult(assignment.name, os.path.basename(submission), parts, problems, timings,
                            isolation=isolation.note)


def add_limit_arguments(parser) -> None:
    """Command-line options for every `Limits` field a grader may want to change."""
    defaults = Limits()
    for name in ("cell_timeout", "case_timeout", "stall_timeout", "run_timeout", "submission_timeout"):
        value = getattr(defaults, name)
        parser.add_argument("--" + name.replace("_", "-"), type=float, default=value,
                            help=f"seconds (default {value:g})")
    parser.add_argument("--judges", type=int, default=defaults.judges,
                        help=f"judge workers side by side (default {defaults.judges})")
    parser.add_argument("--memory-gib", type=float, default=defaults.memory_bytes / 2**30,
                        help=f"address space per worker process (default {defaults.memory_bytes / 2**30:g})")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="run student code WITHOUT isolation (only for code you trust, on a "
                             "machine where bubblewrap cannot run); results.json records it")


def limits_from_args(args) -> Limits:
    return Limits(cell_timeout=args.cell_timeout, case_timeout=args.case_timeout,
                  stall_timeout=args.stall_timeout, run_timeout=args.run_timeout,
                  submission_timeout=args.submission_timeout, judges=args.judges,
                  memory_bytes=int(args.memory_gib * 2**30),
                  sandbox="none" if args.unsandboxed else "auto")


def limit_options(limits: Limits) -> list[str]:
    """`limits` as command-line options (the inverse of `limits_from_args`)."""
    options = [f"--{name.replace('_', '-')}={getattr(limits, name)}" for name in
               ("cell_timeout", "case_timeout", "stall_timeout", "run_timeout", "submission_timeout")]
    options += [f"--memory-gib={limits.memory_bytes / 2**30}", f"--judges={limits.judges}"]
    return options + (["--unsandboxed"] if limits.sandbox == "none" else [])
