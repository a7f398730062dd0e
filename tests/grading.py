"""Grading for the kit's tests: each submission graded once per test session.

Every test module that asserts on a corpus file or a solution shares one grading of it: the
cache is keyed by the file's bytes, the assignment, the limits and the functions graded, so a
file graded by two modules (or under two names) is graded once.

The rule corpora (problem2-4, the warm-up: trusted files whose subject is how the rules read
real compiled programs) are graded in this process by the workers' own code (`graded_here`):
the same request, export, judge and protocol, without the processes and the sandbox around
them, which have end-to-end tests of their own (the attack and fault corpora, the routes).
`test_grading_here_is_grading` keeps the two ways of grading in step.

A file of those corpora holds only the functions it tests (with its imports and helpers) and is
graded as an overlay on the assignment's solution (`overlay_text`, `submission_file`), but for
the few whose subject is the whole submission (`WHOLE_FILES`). Expected scores are written as what a
file gets wrong (the share of each function's points it earns) and totalled from the contract.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import types

import pytest

from assignments.contracts import ASSIGNMENTS, get_assignment
from graders.harness import grade_submission
from graders.results import SubmissionResult
from graders.settings import Limits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBMISSIONS = os.path.join(REPO_ROOT, "tests", "submissions")
_GRADED: dict[tuple, SubmissionResult] = {}
CONCURRENT = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
"""Gradings sharing the machine: one per xdist worker (`make test` runs 3 on 2 cores). The
harness sizes each grading's judges by it, as a batch does (`Limits.judges_for`): a second
judge per grading would only add its start-up to a machine that is already busy."""


def load_module(path: str):
    """A .py file (a solution module, a corpus submission: the overlay it stands for,
    `submission_file`) imported as a module of its own."""
    path = submission_file(path)
    name = "loaded_" + os.path.splitext(os.path.basename(path))[0] + "_" + hashlib.sha256(path.encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- corpus files graded as overlays on the solution ------------------------------------------

OVERLAID = tuple(ASSIGNMENTS)
"""The corpora (`tests/submissions/<assignment>/`, every assignment's) whose files hold only the functions they test
(with their own imports and helpers): each is graded as an overlay on the assignment's solution
(`overlay_text`), so a new graded function touches the solution and its own test, not every file."""

WHOLE_FILES = {
    "problem1": {
        # the submission's top level is the subject: a loop, an allocation, 50 MB printed, forged
        # protocol lines, the solutions read from disk, patches of JAX and the kit
        "loop_top_level", "memory_hog", "huge_output", "forge_events", "reads_solutions", "tampering",
        # what it leaves undefined counts: a function missing, or a file of two functions whose
        # total (2) counts the other three as missing
        "missing_function", "compiled_infinite_loop",
    },
}
"""The files of the `OVERLAID` corpora graded as they are, whole, because their subject is the
whole submission; every other file there is an overlay. (The attack, fault and probe corpora are
always whole.)"""


def is_overlay(path: str) -> bool:
    """Is `path` a file of an `OVERLAID` corpus, not `WHOLE_FILES`?"""
    folder, name = os.path.split(os.path.abspath(path))
    assignment, (stem, extension) = os.path.basename(folder), os.path.splitext(name)
    return (os.path.dirname(folder) == SUBMISSIONS and assignment in OVERLAID and extension == ".py"
            and stem not in WHOLE_FILES.get(assignment, ()))


_OVERLAY = '''


# --- {relative}: its functions over the solution's above (tests/grading.py `overlay_text`) ---
def _overlay(source, graded):
    """Run the corpus file in a namespace of its own (a copy of the solution's, so it may call
    the solution's functions), then put in the module only the graded functions it defines:
    its helpers never replace the solution's, whatever their names, and the solution's
    functions call the graded functions it replaces, as they would in one student's file.
    Compiled under the submission's name (the graders quote only the submission's own frames,
    `export._where`) with the corpus file's lines, so a message names the corpus file's line and
    code as it would the student's. (A frame of the solution's own code would be quoted from
    the corpus file's lines too: none raises in the corpora.)"""
    import linecache

    linecache.cache["<submission>"] = (len(source), None, source.splitlines(True), "<submission>")
    namespace = dict(globals())
    exec(compile(source, "<submission>", "exec"), namespace)
    for name in graded:
        if namespace.get(name) is not globals().get(name):
            globals()[name] = namespace[name]


_overlay({source!r}, {graded!r})
del _overlay
'''


def overlay_text(path: str) -> str:
    """The submission a corpus file stands for: the solution's text (solutions/<assignment>.py,
    its lines and their numbers as they are), then the corpus file run in a namespace of its own
    (`_OVERLAY`), whose graded functions replace the solution's. Not plain concatenation: a
    helper of the corpus file named like one of the solution's would change the solution's
    functions too (Python binds a function's globals when it runs)."""
    assignment = os.path.basename(os.path.dirname(os.path.abspath(path)))
    with open(os.path.join(REPO_ROOT, "solutions", assignment + ".py"), encoding="utf-8") as f:
        solution = f.read()
    with open(path, encoding="utf-8") as f:
        source = f.read()
    graded = tuple(p.name for p in get_assignment(assignment).parts)
    return solution + _OVERLAY.format(relative=os.path.relpath(path, REPO_ROOT), source=source, graded=graded)


_OVERLAYS: list[str] = []


def submission_file(path: str) -> str:
    """The file to grade for `path`: itself, or for an overlay (`is_overlay`) its `overlay_text`
    written to this process's folder under the same name (a batch names its students by it),
    for every route that reads a submission from a file."""
    if not is_overlay(path):
        return path
    if not _OVERLAYS:
        import atexit
        import shutil
        import tempfile

        _OVERLAYS.append(tempfile.mkdtemp(prefix="kit-overlays-"))
        atexit.register(shutil.rmtree, _OVERLAYS[0], True)
    folder = os.path.join(_OVERLAYS[0], os.path.basename(os.path.dirname(os.path.abspath(path))))
    os.makedirs(folder, exist_ok=True)
    written = os.path.join(folder, os.path.basename(path))
    with open(written, "w", encoding="utf-8") as f:
        f.write(overlay_text(path))
    return written


def graded(path: str, assignment: str, limits: Limits | None = None,
           only: list[str] | None = None, here: bool = False) -> SubmissionResult:
    """The cases' verdict on the file at `path` (`grade_submission`, or `graded_here` when
    `here`), graded once per session; a corpus file as an overlay on the solution
    (`submission_file`)."""
    limits = limits or Limits()
    path = submission_file(path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    key = (digest, os.path.splitext(path)[1], assignment, limits.key(), tuple(only or ()), here)
    if key not in _GRADED:
        grade = graded_here if here else functools.partial(grade_submission, concurrent=CONCURRENT)
        _GRADED[key] = grade(path, assignment, limits=limits, only=only)
    for found in _FINDING:
        found.update(problem.rule for problem in problems_of(_GRADED[key]))
    return _GRADED[key]


_FINDING: list[set[str]] = []


@contextlib.contextmanager
def rules_found():
    """The rule ids of the problems found by every grading `graded` returns meanwhile (from the
    session's cache too): what `tests/conftest.py` `rule_sample_met` checks."""
    found: set[str] = set()
    _FINDING.append(found)
    try:
        yield found
    finally:
        _FINDING.remove(found)


def problems_of(result: SubmissionResult) -> list:
    """Every problem of a verdict: the submission's own, then every case's."""
    return list(result.problems) + [p for part in result.parts for c in part.cases for p in c.problems]


def cached_grader(assignment: str, corpus: str, limits: Limits, here: bool = True):
    """grade(name_or_path, limits=None, only=None) -> SubmissionResult, from the session's
    cache, graded in this process (`graded_here`) unless `here` is False. A bare name is a
    file of the corpus (`<corpus>/<name>.py`)."""
    default = limits

    def grade(submission: str, limits: Limits | None = None, only: list[str] | None = None) -> SubmissionResult:
        path = submission if os.sep in submission else os.path.join(corpus, submission + ".py")
        return graded(path, assignment, limits or default, only, here)

    return grade


def graded_here(path: str, assignment_name: str, limits: Limits | None = None,
                only: list[str] | None = None) -> SubmissionResult:
    """`grade_submission`'s verdict, computed in this process: the export worker's request is
    built by the harness and carried out by the export worker's own functions, each artifact
    goes through the protocol's checks to the judge's own functions, and each verdict back
    through them into the harness's results, with the verdict cache as the harness uses it.
    Only for trusted files: the submission runs here, unsandboxed, and a program is compiled
    once per test process (`judge._COMPILED`).

    An overlay (`submission_file`) leaves most of the solution's functions as they are: a
    function that reaches none of the functions the corpus file replaced
    (`left_as_the_solution`) is not exported again, its cases' verdicts are the solution's
    own, graded once per session. (Exporting them again cost CI about 80 CPU-seconds, both stacks.)
    `test_grading_here_is_grading` checks this against the sandboxed graders."""
    results, problems, timings, jobs, assignment = _graded_here(path, assignment_name, limits, only)
    from graders import harness
    from graders.sandbox import choose_isolation

    return harness._submission_result(assignment, path, jobs, results, problems, timings, choose_isolation("none"))


_SOLUTION_VERDICTS: dict[tuple, dict] = {}
"""The solution's case results (job id -> result), by assignment, limits and functions graded:
what an overlay's functions that are still the solution's get (`graded_here`)."""


def _solution_verdicts(assignment_name: str, limits: Limits, only: list[str] | None) -> dict:
    key = (assignment_name, limits.key(), tuple(only or ()))
    if key not in _SOLUTION_VERDICTS:
        solution = os.path.join(REPO_ROOT, "solutions", assignment_name + ".py")
        _SOLUTION_VERDICTS[key] = _graded_here(solution, assignment_name, limits, only)[0]
    return _SOLUTION_VERDICTS[key]


def left_as_the_solution(namespace: dict, graded: list[str]) -> set[str]:
    """The graded functions of a loaded overlay (`overlay_text`) that are the solution's and reach,
    through the names their code looks up when it runs (in nested functions, jit's and
    functools' wrappers, and closures too), no function the overlay replaced. The overlay puts
    its replacements in the module's globals after the solution's code has run, so only such
    look-ups can reach them; what the solution built at its top level keeps the solution's."""
    def unwrapped(obj):
        return getattr(obj, "__wrapped__", obj)  # jax.jit's and functools.wraps's wrappers

    def own(obj) -> bool:
        obj = unwrapped(obj)
        return isinstance(obj, types.FunctionType) and obj.__globals__ is namespace

    replaced = {name for name in graded if not own(namespace.get(name))}

    def reached(name: str) -> set[str]:
        names, stack, visited = {name}, [namespace.get(name)], set()
        while stack:
            obj = stack.pop()
            if id(obj) in visited:
                continue
            visited.add(id(obj))
            stack.extend(getattr(obj, attribute) for attribute in ("__wrapped__", "func") if hasattr(obj, attribute))
            if not isinstance(obj, types.FunctionType):
                continue
            for cell in obj.__closure__ or ():
                with contextlib.suppress(ValueError):  # an empty cell
                    stack.append(cell.cell_contents)
            codes = [obj.__code__]
            while codes:
                code = codes.pop()
                codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
                for looked_up in set(code.co_names) - names:
                    if looked_up in namespace:
                        names.add(looked_up)
                        stack.append(namespace[looked_up])
        return names

    return {name for name in graded if name not in replaced and not reached(name) & replaced}


def _graded_here(path: str, assignment_name: str, limits: Limits | None, only: list[str] | None):
    """`graded_here`'s work: (results by job id, load problems, timings, jobs, assignment)."""
    import io

    from jax._src import config

    from assignments.contract import CHECKS
    from graders import harness, verdicts
    from graders.hidden import grading_secret
    from graders.sandboxed import export, judge
    from graders.sandboxed.protocol import job_text, read_event

    limits = limits or Limits()
    assignment = harness.selected_assignment(assignment_name, only)
    jobs = {job.id: job for job in harness._jobs(assignment, grading_secret())}
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    name = os.path.basename(path) if path.endswith(".ipynb") else "submission.py"
    request = json.loads(harness._export_request(list(jobs.values()), assignment, name, text, limits)([]))
    events = []
    with config.traceback_in_locations_limit(0), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):  # as the export worker runs (see its main)
        try:
            namespace, problems = export.load_submission(name, text, request["cell_timeout"],
                                                         setup_cells=request["setup_cells"])
        except export.SubmissionUnreadable as e:
            namespace, problems = None, [str(e)]
            events = [{"event": "case", "id": i, "status": "error", "message": str(e), "rule": "E004"} for i in jobs]
        reused = set()
        if namespace is not None and _OVERLAYS and os.path.abspath(path).startswith(_OVERLAYS[0] + os.sep):
            reused = left_as_the_solution(namespace, [p.name for p in get_assignment(assignment_name).parts])
        exporter = export.Exporter()
        for part in request["parts"] if namespace is not None else []:
            if part["name"] not in reused:
                export.export_part(exporter, namespace, part, set(), request["case_timeout"],
                                   lambda **event: events.append(event), request["max_strikes"])
    results, timings = {}, {}
    if reused:
        solution = _solution_verdicts(assignment_name, limits, only)
        results.update({i: solution[i] for i, job in jobs.items() if job.part.name in reused})
    for raw in events:
        if raw["event"] != "case":
            continue
        exported = read_event(json.dumps(raw).encode(), {raw["id"]}, "export", harness.eager_ids(jobs.values()))
        job = jobs[exported.id]
        if not exported.ok:
            results[job.id] = harness.export_failure(job, exported)
            continue
        key, event = harness.cached_verdict(assignment, job, exported)  # as the harness's JudgePool does
        if event is None:
            verdict = judge.judge_job(assignment, json.loads(job_text(harness._judge_job(job, exported, assignment))),
                                      timings)
            event = read_event(json.dumps(judge.case_event(job.id, verdict)).encode(), {job.id}, "judge")
            if key:
                verdicts.store(assignment.name, key, event.stored())
        results[job.id] = harness._case_result(job, event)
    problems = [CHECKS["E004"].problem(p) for p in problems]  # as the harness reads the "loaded" event
    return results, problems, timings, list(jobs.values()), assignment


# --- the problem1 corpus's verdicts ------------------------------------------------------------

PROBLEM1 = get_assignment("problem1")
PROBLEM1_POINTS = {p.name: p.points for p in PROBLEM1.parts}
CODE_POINTS = sum(PROBLEM1_POINTS.values())
"""problem1's graded functions' points: what the graders give the solution (the written answer,
the rest of `PROBLEM1.max_score`, is graded by hand)."""
NOTHING = {name: 0 for name in PROBLEM1_POINTS}
"""A verdict's shares for a file that earns nothing."""


def problem1_score(shares: dict[str, float]) -> float:
    """The total of a problem1 verdict whose functions earn `shares` of their points (a function
    not named earns all of its), each part's score rounded as the graders round it."""
    return round(sum(round(points * shares.get(name, 1), 2) for name, points in PROBLEM1_POINTS.items()), 2)


def _around_both(what: str) -> tuple[dict, dict]:
    """The verdict of a file whose two shard_map averages leave their work to jax.jit around the
    shard_map (S003, `what` naming the work): half of each one's points, the values being right."""
    parts = ("shard_average_shard_map", "block_average_shard_map")
    return {f: 1 / 2 for f in parts}, {f: rf"computes around it \({what}" for f in parts}


# student -> ({function: share of its points it earns; the others earn all}, {function: regex its
# output must match}); None: the total is not checked, because it depends on this machine's
# isolation (test_batch_faults.py `test_isolated_faults`).
CORPUS_VERDICTS = {
    "solution": ({}, {}),
    "stub": (NOTHING, {"roll_diff": r"not implemented"}),
    # the problem1 corpus
    "comm_gather_roll": ({"roll_diff": 1 / 2}, {"roll_diff": r"communication observed: .*all-gather"}),
    "comm_whole_roll": ({"roll_diff": 4 / 10}, {"roll_diff": r"collective-permute over X"}),
    "compiled_infinite_loop": ({**NOTHING, "shard_average_shard_map": 1},  # the two functions it defines
                               {"shard_average_jit": r"running the compiled program: it ran longer than 5 s and was stopped"}),
    "crash_one_case": ({"roll_diff": 9 / 10}, {"roll_diff": r"exited with code 3"}),
    "forge_events": (NOTHING, {"roll_diff": r"not part of the grading protocol"}),
    "hang_blocks_alarm": ({"roll_diff": 9 / 10}, {"roll_diff": r"(made no progress for|ran longer than) \d+ s and was stopped"}),
    "hardcoded_mesh": ({"block_average_jit": 1 / 6}, {"block_average_jit": r"cannot reshape array"}),
    "huge_output": ({}, {}),
    "jit_part_uses_shard_map": ({"shard_average_jit": 1 / 2}, {"shard_average_jit": r"must use jax.jit only"}),
    "shard_map_over_x_only": ({}, {}),
    "identity_shard_map": ({"shard_average_shard_map": 1 / 2},
                           {"shard_average_shard_map": r"must do its work inside its shard_map"}),
    "adds_of_slices_outside": _around_both(r"add of slices"),
    "replicated_claim_passes_through": _around_both(r"reduce outside"),
    "sum_of_slices_from_zero": _around_both(r"add of slices"),
    "negated_slices_subtracted": _around_both(r"subtract of slices"),
    "psum_in_groups_of_one_claim": _around_both(r"reduce outside"),
    "work_in_a_composite_outside": _around_both(r"reduce outside"),
    "slices_cut_by_pads_added_outside": _around_both(r"add of slices"),
    "slices_through_a_barrier_added_outside": _around_both(r"add of slices"),
    "loop_outside": _around_both(r"while outside"),
    "triangular_solve_outside": ({"shard_average_shard_map": 1 / 2},
                                 {"shard_average_shard_map": r"computes around it \(custom call \w+ outside"}),
    "loop_top_level": ({"block_average_shard_map": 0, "roll_diff": 0},  # defined after the loop
                       {"roll_diff": r"ran longer than 3 s and was stopped"}),
    "loop_while_tracing": ({"shard_average_shard_map": 0},
                           {"shard_average_shard_map": r"took longer than 2 s: an infinite loop"}),
    "memory_hog": ({}, {}),
    "missing_function": ({"block_average_shard_map": 0}, {"block_average_shard_map": r"was not defined; define it as"}),
    "nan_output": ({"block_average_shard_map": 0}, {"block_average_shard_map": r"NaN element"}),
    "raises": ({"block_average_shard_map": 0}, {"block_average_shard_map": r"raised while tracing: ValueError"}),
    "reads_solutions": (None, {}),
    "replicated_output": ({"shard_average_jit": 0}, {"shard_average_jit": r"wrong sharding: got P\(\)"}),
    "slice_roll": ({"roll_diff": 7 / 10}, {"roll_diff": r"values wrong"}),
    "ignores_inputs": ({"roll_diff": 0},
                       {"roll_diff": r"counts once your function is right on a case whose answer depends"}),
    "tampering": (NOTHING, {"roll_diff": r"not implemented"}),
    "wrong_dtype": ({"shard_average_shard_map": 0}, {"shard_average_shard_map": r"wrong dtype: got bfloat16"}),
    "wrong_shape": ({"shard_average_jit": 0}, {"shard_average_jit": r"wrong shape: got \(16, 8\)"}),
    "returns_dict": ({"shard_average_shard_map": 0},
                     {"shard_average_shard_map": r"returned a dict; expected one array"}),
    "wrong_signature": ({"roll_diff": 0}, {"roll_diff": r"wrong signature"}),
    # tests/submissions/faults
    "truncated": (NOTHING, {"roll_diff": r"not a valid notebook \(Unterminated string.*save it again and resubmit"}),
    "not_a_notebook": (NOTHING, {"roll_diff": r"not a valid notebook \(it has no 'cells' list\)"}),
    "deleted_cells": ({"block_average_jit": 0}, {"block_average_jit": r"function block_average_jit was not defined"}),
    "duplicated_cells": ({"shard_average_jit": 0},
                         {"shard_average_jit": r"values wrong: (some|most|every) elements? of the result differs?"}),
    "edited_setup_cell": ({}, {}),
    # the mistakes sample with its cells' nbgrader flags edited and a 100-point grade cell added; the
    # locked set-up cell runs as released (as nbgrader restores it)
    "forged_cell_metadata": ({"shard_average_jit": 0, "block_average_jit": 1 / 6, "roll_diff": 4 / 10},
                             {"roll_diff": r"values wrong"}),
    "empty": (NOTHING, {"roll_diff": r"function roll_diff was not defined; define it as roll_diff\(A, \*, mesh, shift\)"}),
    "binary": (NOTHING, {"roll_diff": r"submission has a syntax error: source code string cannot contain null bytes"}),
    "syntax_error": (NOTHING, {"roll_diff": r"submission has a syntax error at line 6: expected ':'"}),
    "writes_files": ({}, {}),
    "network": ({**NOTHING, "shard_average_jit": 1, "shard_average_shard_map": 1},  # the two functions it defines
                {"roll_diff": r"was not defined"}),
}
"""What each file of the problem1 and fault corpora scores, by what it gets wrong: the sandbox's
files in the batch of test_batch_faults.py, the others (and the reading faults again) in
test_graders_problem1.py. Totals follow from the contract's points (`expected_score`)."""


def expected_score(student: str) -> float:
    """`student`'s total in `CORPUS_VERDICTS`, from the contract's points."""
    return problem1_score(CORPUS_VERDICTS[student][0])


def assert_verdict(result: SubmissionResult, student: str) -> None:
    """`result` is `student`'s verdict in `CORPUS_VERDICTS`: no fault of the graders, each
    function's score its share of its points and the total theirs (unless None), the total the sum
    of its parts, and each named function below its maximum, saying why."""
    shares, messages = CORPUS_VERDICTS[student]
    assert result.failure is None or not result.failure.graders_fault, (student, result.failure)
    if shares is not None:
        assert {p.name: p.max_score for p in result.parts} == PROBLEM1_POINTS, student
        assert {p.name: p.score for p in result.parts} == pytest.approx(
            {name: round(points * shares.get(name, 1), 2) for name, points in PROBLEM1_POINTS.items()}), \
            (student, result.to_gradescope()["output"])
        assert result.score == pytest.approx(expected_score(student)), (student, result.to_gradescope()["output"])
    assert result.score == pytest.approx(sum(p.score for p in result.parts))
    for function, pattern in messages.items():
        part = result.part(function)
        assert re.search(pattern, part.output), (student, part.output)
        assert part.score < part.max_score, (student, function)
    assert_named_by_the_listing(result)


@functools.lru_cache(maxsize=1)
def _listed_ids() -> frozenset[str]:
    """The ids `python -m assignments.rules` names: the kit's checks and every part's rules."""
    from assignments.rulebook import listing

    return frozenset(re.findall(r"^  ([A-Z]\d{3}) ", listing(), flags=re.M))


def assert_named_by_the_listing(result: SubmissionResult) -> None:
    """Every problem of `result` (each case's, and the submission's) is a typed record whose rule
    id `python -m assignments.rules` lists, and the record comes back whole from results.json."""
    problems = problems_of(result)
    assert {p.rule for p in problems} <= _listed_ids(), sorted({p.rule for p in problems} - _listed_ids())
    again = SubmissionResult.from_json(json.loads(json.dumps(result.to_json())))
    assert [c.problems for part in again.parts for c in part.cases] == \
        [c.problems for part in result.parts for c in part.cases]


def assert_only_broken(result: SubmissionResult, broken: str, share: float, message: str) -> None:
    """`broken` scores exactly `share` of its points and its output matches `message`; all
    others full marks."""
    score = round(PROBLEM1_POINTS[broken] * share, 2)
    assert [p.name for p in result.parts] == list(PROBLEM1_POINTS)
    for part in result.parts:
        assert part.max_score == PROBLEM1_POINTS[part.name]
        if part.name == broken:
            assert part.score == pytest.approx(score), part.output
            assert not part.passed
            assert re.search(message, part.output), part.output
        else:
            assert part.score == part.max_score, part.output
            assert part.passed
    assert result.score == pytest.approx(sum(PROBLEM1_POINTS.values()) - PROBLEM1_POINTS[broken] + score)


def failing_cases(result: SubmissionResult, name: str):
    return [c for c in result.part(name).cases if not c.passed]


# --- the problem1 corpus, graded once per session by graders.batch ------------------------------

CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem1")
FAULTS = os.path.join(REPO_ROOT, "tests", "submissions", "faults")
CORPUS_LIMITS = Limits(cell_timeout=3, case_timeout=2, stall_timeout=8, run_timeout=5)
"""Small limits, so that the corpus's hangs cost seconds."""
PLANTED = "planted_by_submission.txt"
SANDBOXED = {
    # the sandbox, the supervisor and their limits are the subject: hangs, crashes, forged
    # events, output floods, files, the network, the kit's own files and the solutions
    "crash_one_case", "forge_events", "hang_blocks_alarm", "huge_output", "loop_top_level",
    "loop_while_tracing", "reads_solutions", "network", "writes_files",
    # files that are not Python or not a notebook, which must not stop a batch
    "binary", "truncated",
}
"""The corpus files graded through `graders.batch` in the sandbox, on one stack (test_batch_faults.py).
The others (one function wrong, missing, of the wrong signature, a malformed or edited
notebook: messages and scores are their subject) are graded in the test process by the
workers' own code (`graded_here`), on both stacks, but for `JAX_FAULTS`."""
JAX_FAULTS = {"compiled_infinite_loop", "memory_hog", "tampering"}
"""The sandbox's faults that go through JAX (a compiled loop that never ends, an allocation
against the address-space limit that jaxlib's reservations share, patches of jax.jit and
jax.export): graded one by one in the sandbox, on both stacks (test_graders_problem1.py)."""
BATCH_STUDENTS = SANDBOXED | {"solution", "stub"}
"""The students `graders.batch` grades: the `SANDBOXED` files, the solution and the stub."""


def corpus_files() -> dict[str, str]:
    """Student name -> file: the problem1 corpus, the fault corpus, the solution and the stub."""
    files = {os.path.splitext(n)[0]: os.path.join(folder, n) for folder in (CORPUS, FAULTS)
             for n in sorted(os.listdir(folder)) if n.endswith((".py", ".ipynb"))}
    files["solution"] = os.path.join(REPO_ROOT, "solutions", "problem1.py")
    files["stub"] = os.path.join(REPO_ROOT, "release", "problem1", "problem1.ipynb")
    return files


class CorpusBatch:
    """The files of the problem1 and fault corpora whose subject is the sandbox or the batch
    (`SANDBOXED`), the solution and the untouched stub, graded into one folder, `out`
    (results.json per student), by `python -m graders.batch` (4 workers); its `stdout`, and
    `accepted`: connections the network fault made to a listening port, which must be 0.
    `result(name)` is a student's `SubmissionResult` as written there. (The corpora's other
    files are graded in the test process, by test_graders_problem1.py.)"""

    def __init__(self, root: str):
        import shutil
        import socket
        import subprocess
        import sys

        source = os.path.join(root, "submissions")
        os.makedirs(source)
        files = corpus_files()
        for student in BATCH_STUDENTS:
            shutil.copy(submission_file(files[student]), os.path.join(source, student + os.path.splitext(files[student])[1]))
        for path in planted_files():
            assert not os.path.exists(path), f"left over from an earlier run: {path}"
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        self.out = os.path.join(root, "graded")
        printed = os.path.join(root, "batch.out")
        try:
            with open(printed, "w") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "graders.batch", "-a", "problem1", source, "-o", self.out,
                     "--workers", "4", *CORPUS_LIMITS.to_arguments()], cwd=REPO_ROOT, stdout=out,
                    stderr=subprocess.STDOUT, env={**os.environ, "FAULT_LISTEN_PORT": str(server.getsockname()[1])})
            try:
                proc.wait(timeout=900)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.accepted = 0
            while True:
                try:
                    server.accept()[0].close()
                    self.accepted += 1
                except BlockingIOError:
                    break
        finally:
            server.close()
            self.planted = [p for p in planted_files() if os.path.exists(p)]
            for p in self.planted:
                os.remove(p)
        with open(printed) as f:
            self.stdout = f.read()
        assert proc.returncode == 0, self.stdout[-6000:]
        assert not self.planted, f"a submission planted files in the kit or JAX: {self.planted}"

    SAVED = "corpus-batch.json"

    def save(self) -> None:
        """Written beside the graded folder, for the run's other xdist workers (`shared`)."""
        import json

        with open(os.path.join(os.path.dirname(self.out), self.SAVED), "w") as f:
            json.dump({"out": self.out, "stdout": self.stdout, "accepted": self.accepted}, f)

    @classmethod
    def shared(cls, root: str) -> "CorpusBatch":
        """The batch graded once per test run: by the first xdist worker that needs it (the
        others wait on a lock and read what it saved), or by this process without xdist."""
        import fcntl
        import json

        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "corpus-batch.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            saved = os.path.join(root, cls.SAVED)
            if os.path.exists(saved):
                batch = cls.__new__(cls)
                with open(saved) as f:
                    vars(batch).update(json.load(f))
                batch.planted = []
                return batch
            batch = cls(root)
            batch.save()
            return batch

    def result(self, name: str) -> SubmissionResult:
        from graders.results import read_results

        return read_results(os.path.join(self.out, name, "results.json"))


def planted_files() -> list[str]:
    """Where the corpus's writes_files would plant a file in the kit or in JAX."""
    import importlib.util

    return [os.path.join(os.path.dirname(importlib.util.find_spec(m).origin), PLANTED)
            for m in ("assignments", "jax")]
