"""Grade every submission of an assignment: in parallel, resumable, with a gradebook at the end.

    python -m graders.batch --assignment problem1 SOURCE [-o OUT] [--workers N] [--gradebook]
    python -m graders.batch --assignment problem1 SOURCE --dask [--workers N]       # a local Dask cluster
    python -m graders.batch --assignment problem1 SOURCE --scheduler tcp://host:8786  # Dask on many machines

SOURCE is an nbgrader `submitted/` tree (`SOURCE/<student>/<assignment>/<notebook>.ipynb`)
or a folder of `.ipynb`/`.py` files (one per student, named after the student).
Each submission is graded by `graders.harness.grade_submission` in a pool of worker
processes (each grading starts its own sandboxed children, so one bad submission costs
only itself). As each finishes, its Gradescope-format `OUT/<student>/results.json` is
written atomically (a temporary file renamed into place), with the submission's SHA-256
in `extra_data`; a rerun skips every submission whose results.json is complete and whose
file has not changed since, so a batch stopped half way loses nothing already graded.
At the end `OUT/gradebook.csv` lists every student's scores.

With `--dask` (a `LocalCluster` of `--workers` processes on this machine) or `--scheduler
ADDRESS` (a running `dask scheduler`), each submission is graded by a Dask worker instead,
in the same way: the task carries the submission's bytes (no shared filesystem needed),
the worker writes them to a temporary file and runs `python -m graders` on it, sandboxed
as here; results, resuming and the gradebook stay on this machine, and a worker that dies
costs that submission a retry, not the batch. Each worker machine needs the kit (the same
commit, on `PYTHONPATH`, as the scheduler does) with its environment, bubblewrap, and the
course's secret (`.grading-secret` or `$KIT_GRADING_SECRET`): the secret never travels in a
task, only a fingerprint that lets a worker refuse to grade with a different one.

With `--gradebook`, each grade also goes into nbgrader's database (the same cells
`nbgrader autograde` fills), so `nbgrader export` and `nbgrader generate_feedback` see the
same scores. Only the automatic score of code grade cells is written: a manual score
given in formgrader, and the written answers, are never touched.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import csv
import dataclasses
import datetime
import hashlib
import hmac
import io
import json
import os
import subprocess
import statistics
import sys
import tempfile
import time

from .harness import Limits, limit_options

RESULTS = "results.json"
GRADEBOOK_CSV = "gradebook.csv"
MAX_RETRIES = 2
"""Times a submission is regraded when the process grading it fails (not the sandboxed
workers: their failures are grades); then it is recorded as a grader failure."""
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Submission:
    student: str
    path: str | None
    """The file to grade, or None when the student's folder has none."""
    note: str = ""
    """Why this file was chosen, when there was a choice to make."""


# --- finding submissions ---------------------------------------------------------------


def _pick(files: list[str], assignment: str) -> tuple[str | None, str]:
    """The file to grade among a student's files: `<assignment>.ipynb`, else the only
    notebook, else the only module; with a note when others were passed over."""
    notebooks = sorted(f for f in files if f.endswith(".ipynb"))
    modules = sorted(f for f in files if f.endswith(".py"))
    for preferred in (f"{assignment}.ipynb", f"{assignment}.py"):
        match = [f for f in files if os.path.basename(f) == preferred]
        if match:
            others = len(notebooks) + len(modules) - 1
            return match[0], (f"graded {preferred}; {others} other file(s) ignored" if others else "")
    for group in (notebooks, modules):
        if group:
            note = "" if len(group) == 1 else (f"{len(group)} candidate files; graded "
                                               f"{os.path.basename(group[0])} (name it {assignment}.ipynb)")
            return group[0], note
    return None, ""


def discover(source: str, assignment: str) -> list[Submission]:
    """Every student's submission under `source` (an nbgrader submitted/ tree, a course
    folder holding one, or a flat folder of files), sorted by student."""
    source = os.path.abspath(source)
    if not os.path.isdir(source):
        raise SystemExit(f"no folder at {source}: pass nbgrader's submitted/ folder or a "
                         f"folder of .ipynb/.py files")
    if os.path.isdir(os.path.join(source, "submitted")) and not any(
            os.path.isdir(os.path.join(source, d, assignment)) for d in os.listdir(source)):
        source = os.path.join(source, "submitted")
    entries = sorted(os.listdir(source))
    nbgrader_tree = [d for d in entries if os.path.isdir(os.path.join(source, d, assignment))]
    found: list[Submission] = []
    if nbgrader_tree:
        for student in nbgrader_tree:
            folder = os.path.join(source, student, assignment)
            files = []
            for root, dirs, names in os.walk(folder):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                files += [os.path.join(root, n) for n in names if n.endswith((".ipynb", ".py"))]
            path, note = _pick(files, assignment)
            found.append(Submission(student, path, note or ("" if path else
                                    f"no .ipynb or .py file in {student}/{assignment}/")))
        return found
    files = [e for e in entries if e.endswith((".ipynb", ".py")) and not e.startswith(".")
             and os.path.isfile(os.path.join(source, e))]
    stems: dict[str, int] = {}
    for name in files:
        stem = os.path.splitext(name)[0]
        stems[stem] = stems.get(stem, 0) + 1
    for name in files:
        stem = os.path.splitext(name)[0]
        found.append(Submission(stem if stems[stem] == 1 else name, os.path.join(source, name)))
    return found


def file_sha256(path: str | None) -> str | None:
    if path is None or not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- results on disk ---------------------------------------------------------------------


def write_atomic(path: str, text: str) -> None:
    """Write `text` to `path` so that a reader (or a rerun after a crash) sees the old file
    or the new one, never half of one."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def read_results(out: str, student: str) -> dict | None:
    try:
        with open(os.path.join(out, student, RESULTS), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def is_current(results: dict | None, assignment: str, sha256: str | None, only) -> bool:
    """Is a stored results.json a complete grade of this very file?"""
    extra = (results or {}).get("extra_data") or {}
    return (extra.get("complete") is True and extra.get("assignment") == assignment
            and extra.get("sha256") == sha256 and extra.get("only") == (list(only) if only else None))


# --- grading, in the pool's worker processes ---------------------------------------------


def grade_one(student: str, path: str | None, assignment: str, limits: Limits,
              only: list[str] | None, scratch: str | None = None) -> dict:
    """Grade one submission in a `python -m graders` process of its own; returns its
    Gradescope-format results, or {"error": ...} when that process failed. A submission can
    only reach its own sandbox, never this process or another grading. (`scratch`: where
    its temporary folder goes, default the system's.)"""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="batch-", dir=scratch) as tmp:
        out = os.path.join(tmp, RESULTS)
        command = [sys.executable, "-m", "graders", path or os.path.join("missing", student),
                   "--assignment", assignment, "-o", out, "--quiet", *limit_options(limits)]
        if only:
            command += ["--only", *only]
        try:
            proc = subprocess.run(command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=limits.submission_timeout + 120, start_new_session=True)
        except subprocess.TimeoutExpired:
            return {"error": f"the grading process ran over {limits.submission_timeout + 120:g} s"}
        data = read_json(out)
        if proc.returncode != 0 or data is None:
            tail = (proc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            return {"error": f"the grading process failed (exit code {proc.returncode}): {tail[0][:300]}"}
    data["execution_time"] = round(time.perf_counter() - started, 2)
    return data


def read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) and isinstance(data.get("tests"), list) else None
    except (OSError, ValueError):
        return None


def read_secret() -> bytes | None:
    """This machine's course secret as `graders.hidden.grading_secret` finds it, or None
    when there is none yet (never created here)."""
    from .hidden import SECRET_VARIABLE, secret_file

    if os.environ.get(SECRET_VARIABLE):
        return os.environ[SECRET_VARIABLE].encode()
    try:
        with open(secret_file(), "rb") as f:
            return f.read().strip() or None
    except OSError:
        return None


def secret_fingerprint(secret: bytes | None) -> str | None:
    """A short digest that tells whether two machines hold the same secret (it does not
    tell the secret: a Dask task carries this, never the secret itself)."""
    if secret is None:
        return None
    return hmac.new(secret, b"graders.batch: same course secret?", hashlib.sha256).hexdigest()[:16]


def grade_shipped(student: str, name: str | None, data: bytes | None, assignment: str,
                  limits: Limits, only: list[str] | None, fingerprint: str | None) -> dict:
    """A Dask task: grade a submission sent as its file name and bytes, on this worker, as
    `grade_one` does (the worker itself never runs student code). Refuses, with an error
    the batch records, when this machine's course secret is not the batch's."""
    if fingerprint is not None:
        here = secret_fingerprint(read_secret())
        if here != fingerprint:
            import socket

            what = "no course secret" if here is None else "a different course secret"
            return {"error": f"the Dask worker on {socket.gethostname()} has {what}: copy the "
                             f"course's .grading-secret into the kit there (or set KIT_GRADING_SECRET)"}
    try:  # the worker's own scratch space, which Dask clears if the worker dies mid-grading
        from distributed import get_worker

        scratch = get_worker().local_directory
    except Exception:
        scratch = None
    with tempfile.TemporaryDirectory(prefix="batch-shipped-", dir=scratch) as tmp:
        path = None
        if data is not None:
            path = os.path.join(tmp, os.path.basename(name or f"{student}.py"))
            with open(path, "wb") as f:
                f.write(data)
        return grade_one(student, path, assignment, limits, only, scratch=tmp)


def failure_results(assignment, student: str, why: str) -> dict:
    """A zero for every part, when the graders themselves failed on a submission."""
    from .results import SubmissionResult

    message = (f"the graders could not grade this submission ({why}); this is not the "
               f"student's fault: rerun the batch to try it again")
    return SubmissionResult.failed(assignment, student, message).to_gradescope()


# --- nbgrader's gradebook ------------------------------------------------------------------


class NbgraderGradebook:
    """Writes batch grades into nbgrader's database, as `nbgrader autograde` would.

    Only `auto_score` of code grade cells changes; `manual_score` (formgrader) and the
    written answers are never touched, and a submission row, once there, is never removed.
    """

    def __init__(self, db_url: str, assignment: str, course: str | None):
        from nbgrader.api import Gradebook, MissingEntry

        self.assignment, self.course, self.missing = assignment, course, MissingEntry
        self.gb = Gradebook(db_url)
        try:
            self.gb.find_assignment(assignment)
        except MissingEntry:
            self.gb.close()
            raise SystemExit(
                f"assignment {assignment!r} is not in nbgrader's database at {db_url}: run "
                f"`nbgrader generate_assignment {assignment}` first (it records the grade cells), "
                f"or leave out --gradebook") from None

    def record(self, submission: Submission, results: dict, timestamp: str | None) -> None:
        gb = self.gb
        gb.update_or_create_student(submission.student)
        try:
            sub = gb.find_submission(self.assignment, submission.student)
        except self.missing:
            kwargs = {"timestamp": timestamp} if timestamp else {}
            sub = gb.add_submission(self.assignment, submission.student, **kwargs)
        scores = {t["name"]: float(t["score"]) for t in results.get("tests", [])}
        for notebook in sub.notebooks:
            for grade in notebook.grades:
                if grade.cell.cell_type != "code" or grade.name not in scores:
                    continue
                grade.auto_score = scores[grade.name]
                grade.needs_manual_grade = grade.manual_score is not None
        gb.db.commit()

    def write_feedback_notebook(self, submission: Submission, results: dict) -> None:
        """autograded/<student>/<assignment>/<notebook>.ipynb, so `nbgrader generate_feedback`
        has a notebook to render: the submission with each grade cell showing the graders'
        message and score. A notebook written by `nbgrader autograde` is left alone."""
        if self.course is None or submission.path is None or not submission.path.endswith(".ipynb"):
            return
        import nbformat

        sub = self.gb.find_submission(self.assignment, submission.student)
        for notebook in sub.notebooks:
            target = os.path.join(self.course, "autograded", submission.student, self.assignment,
                                  notebook.name + ".ipynb")
            if os.path.exists(target):
                try:
                    mine = nbformat.read(target, as_version=4).metadata.get("graders_batch")
                except Exception:
                    mine = False
                if not mine:
                    continue
            try:
                nb = nbformat.read(submission.path, as_version=4)
            except Exception:
                nb = nbformat.v4.new_notebook()
            known = {g.name for g in notebook.grades} | {c.name for c in notebook.comments}
            tests = {t["name"]: t for t in results.get("tests", [])}
            seen: set[str] = set()
            for cell in reversed(nb.cells):  # like nbgrader, the last of duplicated cells counts
                meta = cell.metadata.get("nbgrader", {})
                grade_id = meta.get("grade_id")
                if not meta:
                    continue
                if grade_id not in known or grade_id in seen:  # cells nbgrader does not know
                    cell.metadata.pop("nbgrader")
                    continue
                seen.add(grade_id)
                if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                    from .preprocessors import grade_cell_outputs

                    cell.outputs = grade_cell_outputs(tests.get(grade_id), f"no grader result for {grade_id!r}")
            nb.metadata["graders_batch"] = True
            write_atomic(target, nbformat.writes(nb))
            stamp = os.path.join(os.path.dirname(submission.path), "timestamp.txt")
            if os.path.exists(stamp):
                with open(stamp) as f:
                    write_atomic(os.path.join(os.path.dirname(target), "timestamp.txt"), f.read())

    def close(self) -> None:
        self.gb.close()


def nbgrader_timestamp(submission: Submission) -> str | None:
    if submission.path is None:
        return None
    stamp = os.path.join(os.path.dirname(submission.path), "timestamp.txt")
    try:
        with open(stamp) as f:
            return f.read().strip() or None
    except OSError:
        return None


# --- the batch ---------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    submission: Submission
    results: dict
    status: str
    """"graded", "kept" (graded by an earlier run, file unchanged) or "failed" (the graders failed)."""


@dataclasses.dataclass
class _Recorder:
    """Writes each finished grading where it belongs (results.json, nbgrader's database) and
    reports it, as soon as it finishes."""

    assignment: str
    out: str
    only: list[str] | None
    hashes: dict[str, str | None]
    gradebook: "NbgraderGradebook | None"
    on_done: object
    outcomes: dict[str, Outcome] = dataclasses.field(default_factory=dict)

    def keep(self, outcome: Outcome) -> None:
        """A grade from an earlier run (the database converges on the files, even for these)."""
        self.outcomes[outcome.submission.student] = outcome
        self._report(outcome)

    def finish(self, s: Submission, data: dict, status: str) -> None:
        extra = {**(data.get("extra_data") or {}), "student": s.student, "assignment": self.assignment,
                 "submission": s.path, "sha256": self.hashes[s.student],
                 "only": list(self.only) if self.only else None, "complete": status == "graded",
                 "note": s.note,
                 "graded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        if s.path is None and status == "graded":
            data["output"] = f"no submission: {s.note}. " + data.get("output", "")
        data["extra_data"] = extra
        write_atomic(os.path.join(self.out, s.student, RESULTS), json.dumps(data, indent=2))
        self.outcomes[s.student] = outcome = Outcome(s, data, status)
        self._report(outcome)

    def _report(self, outcome: Outcome) -> None:
        if self.gradebook is not None:
            record_in_gradebook(self.gradebook, outcome)
        if self.on_done:
            self.on_done(outcome)


def run_batch(submissions: list[Submission], assignment: str, out: str, *, workers: int = 2,
              limits: Limits = Limits(), only: list[str] | None = None,
              gradebook: NbgraderGradebook | None = None, force: bool = False,
              on_done=None, executor=None) -> list[Outcome]:
    """Grade `submissions` (skipping those already graded), writing each results.json as
    it finishes; `on_done(outcome)` is called after each. Returns every outcome.

    `executor` runs the gradings: by default a pool of `workers` threads here, each running
    `grade_one`; or a `dask.distributed.Client`, whose workers run `grade_shipped` on the
    submission's bytes. Either way results are written here, as each finishes."""
    hashes = {s.student: file_sha256(s.path) for s in submissions}
    recorder = _Recorder(assignment, out, only, hashes, gradebook, on_done)
    pending: list[Submission] = []
    for s in submissions:
        stored = read_results(out, s.student)
        if not force and is_current(stored, assignment, hashes[s.student], only):
            recorder.keep(Outcome(s, stored, "kept"))
        else:
            pending.append(s)
    own = executor is None
    pool = cf.ThreadPoolExecutor(max_workers=max(1, workers)) if own else executor
    with pool if own else contextlib.nullcontext():
        _grade_until_done(pending, pool, recorder, limits)
    return [recorder.outcomes[s.student] for s in submissions]


def _grade_until_done(pending: list[Submission], pool, recorder: _Recorder, limits: Limits) -> None:
    """Grade `pending` on `pool`; a grading that fails is retried (MAX_RETRIES), then
    recorded as the graders' failure."""
    submit, as_completed = _dispatch(pool, recorder.assignment, limits, recorder.only)
    tries: dict[str, int] = {}
    while pending:
        futures = {submit(s): s for s in pending}
        pending = []
        try:
            for future in as_completed(futures):
                s = futures[future]
                try:
                    data = future.result()
                except Exception as e:  # a Dask worker that died (KilledWorker), a lost connection...
                    data = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                if "error" not in data:
                    recorder.finish(s, data, "graded")
                    continue
                tries[s.student] = tries.get(s.student, 0) + 1
                if tries[s.student] > MAX_RETRIES:
                    recorder.finish(s, failure_results(recorder.assignment, s.student, data["error"]), "failed")
                else:
                    pending.append(s)
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            raise


def is_dask_client(executor) -> bool:
    return type(executor).__module__.split(".")[0] == "distributed" and hasattr(executor, "scheduler_info")


def _dispatch(executor, assignment: str, limits: Limits, only):
    """(submit(submission) -> future, as_completed(futures)) for `executor`."""
    if not is_dask_client(executor):
        return (lambda s: executor.submit(grade_one, s.student, s.path, assignment, limits, only),
                cf.as_completed)
    import uuid

    from distributed import as_completed

    from .batch import grade_shipped  # by reference to graders.batch, even when run as __main__
    from .hidden import grading_secret

    fingerprint = secret_fingerprint(grading_secret())  # the course's (made here if it has none yet)

    def submit(s: Submission):
        data = None
        if s.path is not None:
            try:
                with open(s.path, "rb") as f:
                    data = f.read()
            except OSError:
                pass
        name = os.path.basename(s.path) if s.path else None
        # pure=False and a fresh key: a retry is a new task, never the failed one's result
        return executor.submit(grade_shipped, s.student, name, data, assignment, limits, only,
                               fingerprint, pure=False, key=f"grade-{s.student}-{uuid.uuid4().hex[:8]}")

    return submit, lambda futures: as_completed(list(futures))


def dask_client(scheduler: str | None, workers: int):
    """A Dask client: of a new `LocalCluster` of `workers` single-threaded processes
    (`scheduler` None or "local"), or of the scheduler at `scheduler`."""
    try:
        from distributed import Client
    except ImportError:
        raise SystemExit("--dask and --scheduler need dask.distributed: pip install 'dask[distributed]'") from None
    if scheduler in (None, "local"):
        import logging

        return Client(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR)
    return Client(scheduler, timeout="30s")


def record_in_gradebook(gradebook: NbgraderGradebook, outcome: Outcome) -> None:
    if outcome.status == "failed":
        return  # a grader failure is no grade: leave nbgrader's database as it was
    gradebook.record(outcome.submission, outcome.results, nbgrader_timestamp(outcome.submission))
    gradebook.write_feedback_notebook(outcome.submission, outcome.results)


def gradebook_rows(outcomes: list[Outcome], assignment: str, only) -> tuple[list[str], list[dict]]:
    from assignments.contracts import get_assignment

    parts = [p for p in get_assignment(assignment).parts if not only or p.name in only]
    header = ["student", *(p.name for p in parts), "score", "max_score", "status", "submission",
              "sha256", "problems"]
    rows = []
    for o in outcomes:
        tests = {t["name"]: t for t in o.results.get("tests", [])}
        extra = o.results.get("extra_data") or {}
        problems = [f"{t['name']}: {first_problem(t)}" for t in tests.values()
                    if t.get("status") != "passed"]
        row = {"student": o.submission.student,
               **{p.name: tests.get(p.name, {}).get("score", 0.0) for p in parts},
               "score": o.results.get("score", 0.0), "max_score": sum(p.points for p in parts),
               "status": o.status, "submission": o.submission.path or "",
               "sha256": extra.get("sha256") or "", "problems": " | ".join(problems)[:500]}
        rows.append(row)
    return header, rows


def write_gradebook_csv(path: str, outcomes: list[Outcome], assignment: str, only) -> None:
    header, rows = gradebook_rows(outcomes, assignment, only)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header)
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buffer.getvalue())


# --- the command line --------------------------------------------------------------------


def first_problem(test: dict) -> str:
    """The first thing that went wrong in one graded function (a results.json test), as the
    results model recorded it (`PartResult.first_problem`); never parsed from the text."""
    return str((test.get("extra_data") or {}).get("first_problem") or "")


def summary_tables(outcomes: list[Outcome], assignment: str, only, console) -> None:
    from rich import box
    from rich.table import Table

    from assignments.contracts import get_assignment

    parts = [p for p in get_assignment(assignment).parts if not only or p.name in only]
    table = Table(title=f"{assignment}: {len(outcomes)} submission(s) by graded function",
                  box=box.SIMPLE_HEAVY)
    for column in ("function", "points", "mean", "full marks", "zero", "most common problem"):
        table.add_column(column, justify="left" if column in ("function", "most common problem") else "right")
    for p in parts:
        scores, problems = [], {}
        for o in outcomes:
            test = next((t for t in o.results.get("tests", []) if t["name"] == p.name), None)
            scores.append(float(test["score"]) if test else 0.0)
            if test and test.get("status") != "passed":
                first = first_problem(test)[:70]
                problems[first] = problems.get(first, 0) + 1
        common = max(problems, key=problems.get) if problems else ""
        table.add_row(p.name, f"{p.points:g}", f"{statistics.mean(scores):.2f}" if scores else "-",
                      str(sum(s >= p.points for s in scores)), str(sum(s == 0 for s in scores)),
                      f"{common} ({problems[common]}x)" if common else "")
    console.print(table)
    students = Table(title="students" + (" (lowest 25)" if len(outcomes) > 25 else ""),
                     box=box.SIMPLE)
    for column in ("student", "score", "status", "time (s)", "first problem"):
        students.add_column(column, justify="right" if column in ("score", "time (s)") else "left")
    maximum = sum(p.points for p in parts)
    shown = sorted(outcomes, key=lambda o: (o.results.get("score", 0), o.submission.student))[:25]
    for o in sorted(shown, key=lambda o: o.submission.student):
        failing = [t for t in o.results.get("tests", []) if t.get("status") != "passed"]
        first = f"{failing[0]['name']}: {first_problem(failing[0])}"[:90] if failing else ""
        style = {"failed": "red", "kept": "dim"}.get(o.status, "")
        students.add_row(o.submission.student, f"{o.results.get('score', 0):g}/{maximum:g}",
                         f"[{style}]{o.status}[/{style}]" if style else o.status,
                         f"{o.results.get('execution_time', 0):.1f}", first)
    console.print(students)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m graders.batch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="nbgrader's submitted/ folder, or a folder of .ipynb/.py files")
    parser.add_argument("--assignment", "-a", required=True)
    parser.add_argument("-o", "--out", help="results folder (default: graded/<assignment> here)")
    parser.add_argument("--workers", "-j", type=int, default=max(1, (os.cpu_count() or 2)),
                        help="submissions graded at once (default: the number of CPUs); with --dask, "
                             "the local Dask cluster's worker processes")
    parser.add_argument("--dask", action="store_true",
                        help="grade on a Dask LocalCluster of --workers processes on this machine")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="grade on the Dask cluster whose scheduler is at ADDRESS (e.g. "
                             "tcp://host:8786; 'local' is the same as --dask)")
    parser.add_argument("--only", nargs="+", metavar="FUNCTION", help="grade only these functions")
    parser.add_argument("--force", action="store_true", help="regrade even unchanged submissions")
    parser.add_argument("--gradebook", action="store_true",
                        help="also write the scores into nbgrader's database (see --db)")
    parser.add_argument("--db", help="nbgrader database URL (default: sqlite:///COURSE/gradebook.db, "
                                     "COURSE being the folder that holds submitted/)")
    from .harness import add_limit_arguments

    add_limit_arguments(parser)
    return parser


def _isolation_ok(args, limits: Limits, console) -> bool:
    """Say which isolation grading uses; False when it cannot be had here."""
    from .sandbox import SandboxUnavailable, choose_isolation

    if args.scheduler not in (None, "local"):  # the workers grade, each checking its own sandbox
        console.print("isolation: chosen on each Dask worker (a worker without bubblewrap fails its "
                      "submissions unless --unsandboxed)")
        return True
    try:
        console.print(f"isolation: {choose_isolation(limits.sandbox).note}")
        return True
    except SandboxUnavailable as e:
        console.print(f"[red]error[/red]: {e}")
        return False


def _open_gradebook(args) -> "NbgraderGradebook | None":
    if not args.gradebook:
        return None
    source = os.path.abspath(args.source)
    course = os.path.dirname(source) if os.path.basename(source) == "submitted" else source
    return NbgraderGradebook(args.db or f"sqlite:///{os.path.join(course, 'gradebook.db')}",
                             args.assignment, course)


def _connect(args, console):
    """(The Dask client, or None; how many workers grade). Raises OSError with no scheduler."""
    if not (args.dask or args.scheduler):
        return None, args.workers
    client = dask_client(args.scheduler, args.workers)
    n_workers = len(client.nthreads())
    console.print(f"dask: {n_workers} worker(s), scheduler {client.scheduler.address}"
                  + ("" if n_workers else " (tasks wait until a worker connects)"))
    return client, n_workers


def _grade_with_progress(args, submissions, out, limits, gradebook, client, console, counts):
    """run_batch under a progress bar; the outcomes."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                  TextColumn("{task.fields[last]}"), console=console, transient=False) as progress:
        task = progress.add_task(f"grading {args.assignment}", total=len(submissions), last="")

        def on_done(outcome: Outcome) -> None:
            counts[outcome.status] += 1
            score = outcome.results.get("score", 0)
            progress.update(task, advance=1, last=f"{outcome.submission.student}: {score:g} ({outcome.status})")

        return run_batch(submissions, args.assignment, out, workers=args.workers, limits=limits,
                         only=args.only, gradebook=gradebook, force=args.force, on_done=on_done,
                         executor=client)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    from rich.console import Console

    from assignments.contracts import ASSIGNMENTS

    from .harness import limits_from_args

    if args.assignment not in ASSIGNMENTS:
        parser.error(f"unknown assignment {args.assignment!r}; known: {', '.join(sorted(ASSIGNMENTS))}")
    console = Console(width=max(110, Console().width))
    submissions = discover(args.source, args.assignment)
    if not submissions:
        console.print(f"no submissions of {args.assignment} found under {args.source}: expected "
                      f"<student>/{args.assignment}/*.ipynb folders or .ipynb/.py files")
        return 1
    out = os.path.abspath(args.out or os.path.join("graded", args.assignment))
    limits = limits_from_args(args)
    if not _isolation_ok(args, limits, console):
        return 2
    gradebook = _open_gradebook(args)
    try:
        client, n_workers = _connect(args, console)
    except OSError as e:
        console.print(f"[red]error[/red]: no Dask scheduler at {args.scheduler}: {e}")
        if gradebook is not None:
            gradebook.close()
        return 2
    started = time.perf_counter()
    counts = {"graded": 0, "kept": 0, "failed": 0}
    try:
        outcomes = _grade_with_progress(args, submissions, out, limits, gradebook, client, console, counts)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/yellow]: {counts['graded']} graded in this run and "
                      f"{counts['kept']} from earlier runs are kept in {out}; run the same command "
                      f"again to grade the rest")
        return 130
    finally:
        if gradebook is not None:
            gradebook.close()
        if client is not None:
            with contextlib.suppress(Exception):
                n_workers = len(client.nthreads()) or n_workers
            client.close()
    _print_summary(outcomes, args, out, counts, time.perf_counter() - started, n_workers, client, console)
    return 0


def _print_summary(outcomes, args, out, counts, elapsed, n_workers, client, console) -> None:
    csv_path = os.path.join(out, GRADEBOOK_CSV)
    write_gradebook_csv(csv_path, outcomes, args.assignment, args.only)
    summary_tables(outcomes, args.assignment, args.only, console)
    rate = counts["graded"] / elapsed * 60 if counts["graded"] else 0.0
    console.print(f"{counts['graded']} graded ({rate:.1f} per minute with {n_workers} "
                  f"{'Dask ' if client else ''}worker(s)), {counts['kept']} kept from an earlier run "
                  f"(unchanged), {counts['failed']} the graders failed on (rerun to retry) in {elapsed:.0f} s")
    console.print(f"results: {out}/<student>/{RESULTS}; gradebook: {csv_path}"
                  + ("; nbgrader's database updated" if args.gradebook else ""))


if __name__ == "__main__":
    sys.exit(main())
