"""Grade one submission: export in one sandboxed worker, judge each artifact as it comes.

The grading process never runs student code, nor programs compiled from it:
1. The export worker (`graders.sandboxed.export`) runs the submission in the sandbox
   (`graders.sandbox`) and sends back one serialized `jax.export` artifact per hidden case.
   It never sees a hidden input value.
2. Each artifact goes at once to a judge (`graders.sandboxed.judge`; one or two side by
   side, each in a sandbox of its own), which compiles it on the case's mesh, reads the
   compiled HLO, runs it on the hidden inputs this process sends and compares with the
   float64 reference: compiling overlaps the export's tracing. The judges start at the
   export's first artifact that needs judging, so their start-up overlaps it too. A verdict
   judged before (the same artifact, case and inputs) comes from `graders.verdicts`.
This process never loads JAX (only the workers need it). Every event from either worker is
validated (`graders.sandboxed.protocol`); a worker that hangs, dies or breaks the protocol
costs the case it was on (`graders.supervisor`), and the submission's budget bounds the whole.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass

from assignments.contract import (CHECKS, Assignment, Case, CaseResult, Part, Problem, answer_is_constant, case_request,
                                  check_call, counted_where_answers_depend, style_on_every_mesh)
from assignments.contracts import get_assignment

from . import verdicts
from .files import NotASubmission, read_submission
from .hidden import case_seed, grading_secret, hidden_cases, hidden_inputs, public_seed
from .results import PartResult, SubmissionResult
from .sandbox import Slot
from .sandboxed.protocol import (Died, Exported, Finished, Judged, Loaded, ProtocolError, Unanswered, encode_array,
                                 encode_bytes, encode_tree, job_text, read_event, request_text)
from .settings import DEVICES, Limits
from .setup_cells import SETUP_CELLS
from .supervisor import (EXPORT_COMMAND, JUDGE_COMMAND, Deadlines, JobBoard, Prepared, WorkerProcess,
                         WorkerSetup, run_stream, run_worker)

log = logging.getLogger(__name__)
CASE_GRACE = 15.0
"""Seconds past a case's own time limit before the supervisor kills its worker (at most the
limit itself again): the worker's own alarm should fire first, with a better message."""


def case_id(part: Part, index: int) -> str:
    return f"{part.name}__{index}"


def selected_assignment(name: str, only: list[str] | None) -> Assignment:
    """The assignment, restricted to the functions in `only` when given."""
    assignment = get_assignment(name)
    if not only:
        return assignment
    return dataclasses.replace(assignment, parts=tuple(assignment.part(n) for n in only))


@dataclass
class _Job:
    """One hidden case of one graded function."""

    part: Part
    index: int
    case: Case
    id: str
    seed: int


def _jobs(assignment: Assignment, secret: bytes) -> list[_Job]:
    cases = hidden_cases(assignment)
    return [_Job(part, i, case, case_id(part, i),
                 public_seed(assignment.name, part.name, i) if part.eager
                 else case_seed(assignment.name, part.name, i, secret))
            for part in assignment.parts for i, case in enumerate(cases[part.name])]


def _export_request(jobs: list[_Job], assignment: Assignment, name: str, text: str, limits: Limits):
    """`request_for(skip)`: the export worker's request line, skipping cases already done."""
    parts = []
    for part in assignment.parts:
        cases = []
        for job in (j for j in jobs if j.part is part):
            request = case_request(part, job.case, job.id)
            if part.eager:  # called on concrete inputs (public ones: see graders.hidden)
                request["inputs"] = [encode_tree(a) for a in hidden_inputs(assignment, part, job.case, job.seed)]
            cases.append(request)
        parts.append({"name": part.name, "signature": part.signature, "num_args": len(part.args),
                      "statics": list(part.statics), "eager": part.eager,
                      "takes_mesh": part.takes_mesh, "cases": cases})

    def request_for(skip):
        return request_text("export", submission_name=name, submission_text=text, devices=DEVICES,
                            setup_cells=SETUP_CELLS.get(assignment.name, {}),
                            cell_timeout=limits.cell_timeout, case_timeout=limits.case_timeout,
                            max_strikes=limits.max_strikes, parts=parts, skip=skip)

    return request_for


class JudgePool:
    """The judges of one grading, fed each artifact as the export produces it.

    `submit(job, export_event)` gives a verdict from the cache, or puts the case on the
    judges' board (`JobBoard`), where the first judge that is ready and idle takes it; cases
    with the same artifact on the same mesh go to the judge that took the first of them (they
    share one compiled program). When the cache holds no verdict of the assignment, one judge
    starts with the export (its start-up overlaps the export's; one, not all, so a
    submission that never exports a case wastes little); the others start at the first case
    the cache misses, and join in when they are ready, so a submission served whole from the
    cache starts none. `finish()` closes the board and waits for their verdicts."""

    def __init__(self, assignment: Assignment, limits: Limits, setup: WorkerSetup, end: float,
                 count: int, stack: ExitStack):
        self.assignment, self.setup, self.stack, self.count = assignment, setup, stack, count
        self.deadlines = Deadlines(stall=limits.run_timeout + CASE_GRACE, case=limits.run_timeout, end=end)
        self.results: dict[str, dict] = {}
        self.events: list[dict] = []
        self.keys: dict[str, str] = {}
        self.board = JobBoard()
        self.threads: list[threading.Thread] = []
        self.failures: list[BaseException] = []
        self.lock = threading.Lock()

    def submit(self, job: _Job, export: Exported) -> None:
        key, cached = cached_verdict(self.assignment, job, export)
        if key is not None:
            self.keys[job.id] = key
        if cached is not None:
            self.results[job.id] = cached
            return
        self.start()
        program = (export.artifact if not job.part.eager else job.id, tuple(job.case.mesh))
        self.board.put(job.id, job_text(_judge_job(job, export, self.assignment)), program)

    def start_early(self) -> None:
        """Start one judge now if the cache cannot serve this assignment (see the class)."""
        if not verdicts.holds_any(self.assignment.name):
            self.start(1)

    def start(self, count: int | None = None) -> None:
        """Start judges until `count` (all of them by default) are running."""
        wanted = min(count or self.count, self.count)
        if len(self.threads) >= wanted:  # every case that misses the cache comes here
            return
        header = request_text("judge", assignment=self.assignment.name)
        while len(self.threads) < wanted:
            uid = self.stack.enter_context(Slot()).uid  # each judge a uid of its own: a sweep spares the others
            setup = dataclasses.replace(self.setup, uid=uid)
            started = WorkerProcess(JUDGE_COMMAND, setup)  # its JAX start-up overlaps the export
            thread = threading.Thread(target=self._judge, args=(header, len(self.threads), setup, started),
                                      daemon=True)
            self.threads.append(thread)
            thread.start()
            log.debug("started judge %d of %d", len(self.threads), self.count)

    def _judge(self, header: str, worker: int, setup: WorkerSetup, started: WorkerProcess) -> None:
        try:
            run = run_stream(JUDGE_COMMAND, header, self.board, kind="judge", deadlines=self.deadlines,
                             setup=setup, worker=worker, started=started)
        except BaseException as e:  # the graders' own failure: `finish` raises it in the grading's thread
            with self.lock:
                self.failures.append(e)
            return
        with self.lock:
            self.results.update(run.results)
            self.events += run.events
        for case, event in run.results.items():
            if case in self.keys and isinstance(event, Judged):  # a verdict, not the supervisor's error
                verdicts.store(self.assignment.name, self.keys[case], event.stored())

    def finish(self) -> None:
        """Close the board, wait for the judges; a judge thread's own exception (a bug of the
        graders, never the submission's doing) is raised here, so that the grading fails
        loudly instead of scoring the unjudged cases as the submission's failures."""
        self.board.close()
        for thread in self.threads:
            thread.join()
        if self.failures:
            raise RuntimeError(f"a judge of the graders failed: {self.failures[0]!r}") from self.failures[0]


def eager_ids(jobs) -> frozenset[str]:
    """The cases an export answers with an eager report (`protocol.read_event`'s `reports`)."""
    return frozenset(job.id for job in jobs if job.part.eager)


def cached_verdict(assignment: Assignment, job: _Job, export: Exported) -> tuple[str | None, Judged | None]:
    """The verdict cache's key for a case judged on its artifact (None for an eager part, judged
    on its report) and the verdict the cache holds for it, as a validated judge event (None if
    it holds none)."""
    if job.part.eager:
        return None, None
    key = verdicts.key(assignment.name, job.part.name, job.case.to_json(), job.seed, export.artifact)
    hit = verdicts.load(assignment.name, key)
    return key, None if hit is None else _cached_event(hit, job.id)


def export_failure(job: _Job, event: Exported) -> CaseResult:
    """A case the export worker answered without an artifact (an exception while tracing
    names the call that raises it again on the student's machine)."""
    message = event.message or "no artifact was produced"
    if event.while_tracing:
        message += f"; to see it, run {check_call(job.part, job.case)}"
    return CaseResult.failed(job.case, CHECKS[event.rule].problem(message))


def _cached_event(hit: dict, job_id: str) -> Judged | None:
    """A cached verdict as a validated judge event (None for a stale or damaged entry)."""
    try:
        return read_event(json.dumps({**hit, "event": "case", "id": job_id}).encode(), {job_id}, "judge")
    except ProtocolError:
        return None


def _judge_job(job: _Job, export: Exported, assignment: Assignment) -> dict:
    arrays = hidden_inputs(assignment, job.part, job.case, job.seed)
    request = {"id": job.id, "part": job.part.name, "case": job.case.to_json(),
               "inputs": [encode_tree(a) for a in arrays]}
    if job.part.eager:
        report = dict(export.report)
        if "shards" in report:
            report["shards"] = [{**s, "data": encode_array(s["data"])} for s in report["shards"]]
        request["report"] = report
    else:
        request["artifact"] = encode_bytes(export.artifact)
    return request


def grade_submission(submission: str, assignment_name: str, *, limits: Limits | None = None,
                     secret: bytes | None = None, only: list[str] | None = None,
                     keep_artifacts: str | None = None, concurrent: int = 1,
                     trusted_folder: str | None = None, prepared: Prepared | None = None) -> SubmissionResult:
    """Grade one `.ipynb` or `.py` submission against an assignment's hidden cases (the
    cases only: `graders.run.grade` adds the custom checks of the pytest graders).

    The file is read only if it is a regular file reached without links (from
    `trusted_folder` down, when given). With `keep_artifacts`, the exported artifacts
    (`<function>__<case>.jaxexport`) are also written into that folder (for
    `graders.distributed`). `concurrent`: gradings sharing this machine (sizes the judges).
    `prepared`: the uid, folder and export worker made ahead (`Prepared`, with these limits);
    closed here."""
    limits = limits or (prepared.limits if prepared else Limits())
    assignment = selected_assignment(assignment_name, only)
    timings: dict[str, float] = {}
    results: dict[str, CaseResult] = {}
    with ExitStack() as stack:
        prepared = stack.enter_context(prepared or Prepared(limits))
        jobs = _jobs(assignment, grading_secret() if secret is None else secret)
        try:
            text, problems = read_submission(submission, trusted_folder, limits=limits).decode("utf-8", errors="replace"), []
        except NotASubmission as e:
            text, problems = None, [CHECKS["E004"].problem(str(e))]
        setup = dataclasses.replace(prepared.setup, function_of={j.id: j.part.name for j in jobs})
        end = time.monotonic() + limits.submission_timeout
        judges = JudgePool(assignment, limits, setup, end, limits.judges_for(concurrent), stack)
        if text is not None:
            judges.start_early()
            problems += _export_and_judge(jobs, assignment, submission, text, limits, setup, end,
                                          judges, results, timings, keep_artifacts, prepared.take_export())
    return _submission_result(assignment, submission, jobs, results, problems, timings, prepared.isolation)


def _export_and_judge(jobs, assignment, submission, text, limits, setup, end, judges: JudgePool,
                      results: dict, timings: dict, keep_artifacts, export: WorkerProcess | None) -> list[Problem]:
    """Export every case; judge each artifact as it comes; fill `results`; return problems."""
    by_id = {job.id: job for job in jobs}

    def on_result(event: Exported) -> None:
        job = by_id[event.id]
        if not event.ok:
            results[job.id] = export_failure(job, event)
            return
        if keep_artifacts and event.artifact is not None:
            os.makedirs(keep_artifacts, exist_ok=True)
            with open(os.path.join(keep_artifacts, f"{job.id}.jaxexport"), "wb") as f:
                f.write(event.artifact)
        judges.submit(job, event)

    started = time.perf_counter()
    name = os.path.basename(submission) if submission.endswith(".ipynb") else "submission.py"
    deadlines = Deadlines(stall=limits.stall_timeout, end=end,
                          case=limits.case_timeout + min(CASE_GRACE, limits.case_timeout))
    try:
        run = run_worker(EXPORT_COMMAND, _export_request(jobs, assignment, name, text, limits),
                         [j.id for j in jobs], kind="export", deadlines=deadlines, setup=setup,
                         on_result=on_result, started=export, reports=eager_ids(jobs))
    finally:
        timings["export (all)"] = time.perf_counter() - started
        judges.finish()
    # Cases the export never answered itself: the worker stopped while the submission loaded
    # (E004), or while it traced (E002).
    check = CHECKS["E002" if any(isinstance(e, Loaded) for e in run.events) else "E004"]
    for case, event in run.results.items():
        if case not in results and not event.ok and case not in judges.results:
            results[case] = CaseResult.failed(by_id[case].case, check.problem(event.message or "no artifact"))
    for case, event in judges.results.items():
        results[case] = _case_result(by_id[case], event)
    timings["export and judge (all)"] = time.perf_counter() - started
    return _collect(run.events + judges.events, timings)


def _case_result(job: _Job, event: Judged | Unanswered) -> CaseResult:
    if isinstance(event, Unanswered):  # the supervisor's: the judge never answered
        return CaseResult.failed(job.case, CHECKS["E003"].problem(f"running the compiled program: {event.message}"))
    return CaseResult(job.case, event.values_ok, event.rule_ok, list(event.problems), event.analysis, ran=event.ran)


def _collect(events: list, timings: dict) -> list[Problem]:
    """Add the workers' reported timings to `timings`; return the problems they reported (each
    about running the submission: E004)."""
    problems = []
    for event in events:
        if isinstance(event, Loaded):
            problems += [CHECKS["E004"].problem(p) for p in event.problems]
            timings["export: run the submission"] = event.run_submission_s
        elif isinstance(event, Finished):  # several judges: their times add up
            for phase, seconds in event.timings.items():
                timings[phase] = timings.get(phase, 0.0) + seconds
        elif isinstance(event, Died):
            problems.append(CHECKS["E004"].problem(event.message))
    return problems


def _submission_result(assignment, submission, jobs, results, problems, timings, isolation):
    """The grading's result; a case with no result failed for the first problem reported."""
    unanswered = problems[0] if problems else CHECKS["E004"].problem("no artifact")
    parts = []
    for part in assignment.parts:
        own = [j for j in jobs if j.part is part]
        cases = style_on_every_mesh(part, [results[j.id] if j.id in results else CaseResult.failed(j.case, unanswered)
                                           for j in own])
        constant = [answer_is_constant(assignment, part, j.case) for j in own]
        parts.append(PartResult(part.name, part.points, counted_where_answers_depend(cases, constant)))
    if problems:
        for p in parts:
            if not any(c.values_ok for c in p.cases):
                p.note = "while running your submission: " + "; ".join(problem.message for problem in problems)
    return SubmissionResult(assignment.name, os.path.basename(submission), parts, problems, timings,
                            isolation=isolation.note)
