"""Grade every submission of an assignment: in parallel, resumable, with a gradebook at the end.

    python -m graders.batch --assignment problem1 SOURCE [-o OUT] [--workers N] [--gradebook]
    python -m graders.batch --assignment problem1 SOURCE --dask [--workers N]       # a local Dask cluster
    python -m graders.batch --assignment problem1 SOURCE --scheduler tcp://host:8786  # Dask on many machines

SOURCE is an nbgrader `submitted/` tree (`SOURCE/<student>/<assignment>/<notebook>.ipynb`)
or a folder of `.ipynb`/`.py` files (one per student, named after the student). Only regular
files reached without links are graded: a link (an LMS zip unpacked with `unzip` keeps them)
is refused with 0, and nothing it names is read.

Each submission is graded by a `python -m graders` process of its own (so one bad submission
costs only itself), several at once. As each finishes, its `OUT/<student>/results.json`
(Gradescope's format holding the whole `SubmissionResult`, with the file's SHA-256) is written
atomically; a rerun keeps every result whose file has not changed since, so a batch stopped
half way loses nothing already graded. At the end `OUT/gradebook.csv` lists every student's
scores.

With `--dask` (a `LocalCluster` of `--workers` processes on this machine) or `--scheduler
ADDRESS` (a running `dask scheduler`), each submission is graded by a Dask worker instead
(`graders.dask_grading`): results, resuming and the gradebook stay on this machine, and a
worker that dies costs that submission a retry, not the batch.

With `--gradebook`, each grade also goes into nbgrader's database (the same cells
`nbgrader autograde` fills), so `nbgrader export` and `nbgrader generate_feedback` see the
same scores; a manual score given in formgrader, and the written answers, are never touched.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import dataclasses
import datetime
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .files import NotASubmission, check_submission, read_submission, sha256, unwritable_folder
from .gradebooks import GradebookMissing, NbgraderGradebook, summary_tables, write_gradebook_csv
from .results import (GRADEBOOK_CSV, RESULTS, Provenance, ResultsUnreadable, SubmissionResult, read_results,
                      results_path, write_results)
from .sandbox import dies_with_parent
from .settings import KIT_ROOT, Limits, start_logging

log = logging.getLogger(__name__)
MAX_RETRIES = 2
"""Times a submission is regraded when the process grading it fails (not the sandboxed
workers: their failures are grades); then it is recorded as a grader failure."""


@dataclasses.dataclass(frozen=True)
class Submission:
    """One student's file to grade, as found in the batch's folder."""

    student: str
    path: str | None
    """The file to grade, or None when the student's folder has none."""
    note: str = ""
    """Why this file was chosen, when there was a choice to make."""
    trusted: str | None = None
    """The batch's folder: the file must be reached from there without following a link."""
    refusal: str = ""
    """Why it is not graded at all (not a regular file), or ""."""

    def data(self) -> bytes | None:
        """Its bytes, read only as a regular file reached without links (None if refused)."""
        if self.path is None or self.refusal:
            return None
        try:
            return read_submission(self.path, self.trusted)
        except NotASubmission:
            return None

    def digest(self) -> str | None:
        data = self.data()
        return None if data is None else sha256(data)


# --- finding submissions -------------------------------------------------------------------


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


def _checked(student: str, path: str | None, note: str, trusted: str) -> Submission:
    """A Submission, refused when its file is not a regular file reached without links."""
    refusal = ""
    if path is not None:
        try:
            check_submission(path, trusted)
        except NotASubmission as e:
            refusal = str(e)
    return Submission(student, path, note, trusted, refusal)


_NOT_THE_STUDENTS = ("__MACOSX",)
"""Folders an archiver adds (macOS's zip keeps each file's metadata there, as `._<name>`)."""


def _student_files(folder: str) -> list[str]:
    """The .ipynb and .py files under a student's folder (links included, to be refused;
    no folder reached through a link is entered). Hidden files and folders (`._problem1.ipynb`,
    `.ipynb_checkpoints`) and an archiver's `__MACOSX` are not the student's work."""
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _NOT_THE_STUDENTS
                   and not os.path.islink(os.path.join(root, d))]
        files += [os.path.join(root, n) for n in names if n.endswith((".ipynb", ".py")) and not n.startswith(".")]
    return files


def discover(source: str, assignment: str) -> list[Submission]:
    """Every student's submission under `source` (an nbgrader submitted/ tree, a course
    folder holding one, or a flat folder of files), sorted by student."""
    source = os.path.abspath(source)
    if not os.path.isdir(source):
        raise FileNotFoundError(f"no folder at {source}: pass nbgrader's submitted/ folder or a "
                                f"folder of .ipynb/.py files")
    if os.path.isdir(os.path.join(source, "submitted")) and not any(
            os.path.isdir(os.path.join(source, d, assignment)) for d in os.listdir(source)):
        source = os.path.join(source, "submitted")
    entries = sorted(e for e in os.listdir(source) if not e.startswith("."))
    tree = [d for d in entries if os.path.isdir(os.path.join(source, d, assignment))]
    if tree:
        found = []
        for student in tree:
            folder = os.path.join(source, student, assignment)
            path, note = _pick(_student_files(folder), assignment)
            if path is None and os.path.islink(os.path.join(source, student)):
                path = os.path.join(source, student)  # a linked student folder: refused below
            found.append(_checked(student, path, note or ("" if path else f"no .ipynb or .py file in "
                                                                          f"{student}/{assignment}/"), source))
        return found
    files = [e for e in entries if e.endswith((".ipynb", ".py"))]
    stems = [os.path.splitext(name)[0] for name in files]
    return [_checked(stem if stems.count(stem) == 1 else name, os.path.join(source, name), "", source)
            for stem, name in zip(stems, files)]


# --- grading, one submission per process ---------------------------------------------------


_RUNNING: set[subprocess.Popen] = set()
"""The `python -m graders` processes running now (`grade_one`), for `_stop_gradings`."""
_RUNNING_LOCK = threading.Lock()


def grade_one(student: str, path: str | None, assignment: str, limits: Limits, only: list[str] | None,
              concurrent: int = 1, scratch: str | None = None, trusted: str | None = None) -> SubmissionResult:
    """Grade one submission in a `python -m graders` process of its own, with every limit
    passed on; a failure of that process is a `SubmissionResult` with `failure` set (the
    graders' fault). A submission can only reach its own sandbox, never this process."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="batch-", dir=scratch) as tmp:
        out = os.path.join(tmp, RESULTS)
        command = [sys.executable, "-m", "graders", path or os.path.join("missing", student),
                   "--assignment", assignment, "-o", out, "--quiet", f"--concurrent={concurrent}",
                   *limits.to_arguments(), *(["--within", trusted] if trusted else []),
                   *(["--only", *only] if only else [])]
        # A process group of its own, killed with this process whatever kills it (the parent-death
        # signal) and by `_stop_gradings` when the batch is interrupted.
        with subprocess.Popen(dies_with_parent(command), cwd=KIT_ROOT, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True) as proc:
            with _RUNNING_LOCK:
                _RUNNING.add(proc)
            timed_out = False
            try:
                _, stderr = proc.communicate(timeout=limits.submission_timeout + 120)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
                proc.communicate()
            finally:
                with _RUNNING_LOCK:
                    _RUNNING.discard(proc)
        if timed_out:
            why = f"the grading process ran over {limits.submission_timeout + 120:g} s"
            result = SubmissionResult.failed(assignment, path or "", why, graders_fault=True, only=only)
        else:
            try:
                result = read_results(out)
            except ResultsUnreadable:
                tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
                why = f"the grading process failed (exit code {proc.returncode}): {tail[0][:300]}"
                result = SubmissionResult.failed(assignment, path or "", why, graders_fault=True, only=only)
    result.execution_time = time.perf_counter() - started
    return result


# --- the batch -------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    submission: Submission
    result: SubmissionResult
    status: str
    """"graded", "kept" (graded by an earlier run, file unchanged) or "failed" (the graders failed)."""


def _recorded_for(result: SubmissionResult | None, assignment: str, only) -> bool:
    """Is a stored result a verdict (not the graders' own failure) of this assignment and
    selection of functions, as this run would record it?"""
    return (result is not None and not (result.failure and result.failure.graders_fault)
            and result.assignment == assignment and result.provenance.only == (list(only) if only else None))


def is_current(result: SubmissionResult | None, assignment: str, digest: str | None, only) -> bool:
    """Is a stored result a complete grade of this very file?"""
    return _recorded_for(result, assignment, only) and result.provenance.sha256 == (digest or "")


def _same_refusal(result: SubmissionResult | None, assignment: str, why: str, only) -> bool:
    """Is a stored result the very zero this run would record (no file, a link...)?"""
    return (_recorded_for(result, assignment, only) and result.failure is not None
            and result.failure.message == why)


def _stored(out: str, student: str) -> SubmissionResult | None:
    try:
        return read_results(results_path(out, student))
    except ResultsUnreadable:
        return None


@dataclasses.dataclass
class _Recorder:
    """Writes each finished grading where it belongs (results.json, nbgrader's database) and
    reports it, as soon as it finishes."""

    assignment: str
    out: str
    only: list[str] | None
    digests: dict[str, str | None]
    gradebook: NbgraderGradebook | None
    on_done: object
    outcomes: dict[str, Outcome] = dataclasses.field(default_factory=dict)

    def keep(self, outcome: Outcome) -> None:
        """A grade from an earlier run (the database converges on the files, even for these)."""
        self.outcomes[outcome.submission.student] = outcome
        self._report(outcome)

    def finish(self, s: Submission, result: SubmissionResult, status: str) -> None:
        note = s.note if s.path is not None else (s.note or "no submission")
        result.provenance = Provenance(
            student=s.student, path=s.path or "", sha256=self.digests[s.student] or "", note=note,
            graded_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            only=list(self.only) if self.only else None)
        write_results(results_path(self.out, s.student), result)
        self.outcomes[s.student] = outcome = Outcome(s, result, status)
        self._report(outcome)

    def _report(self, outcome: Outcome) -> None:
        if self.gradebook is not None and outcome.status != "failed":  # a grader failure is no grade
            s = outcome.submission
            timestamp = nbgrader_timestamp(s)
            try:
                data = s.data()
                self.gradebook.record(s.student, outcome.result, timestamp, data)
                self.gradebook.write_feedback_notebook(s.student, s.path, data, outcome.result, timestamp)
            except Exception as e:  # one submission's files never stop the batch (its results.json is written)
                log.error("%s: its grade is in results.json but not in nbgrader's database or feedback: %r",
                          s.student, e)
                with contextlib.suppress(Exception):  # a broken connection: the next write says so
                    self.gradebook.rollback()
        if self.on_done:
            self.on_done(outcome)


def nbgrader_timestamp(submission: Submission) -> str | None:
    """The submission's timestamp.txt (written by `nbgrader submit`, in a folder the student
    owns), if nbgrader can read it as a time; None otherwise."""
    if submission.path is None:
        return None
    stamp = os.path.join(os.path.dirname(submission.path), "timestamp.txt")
    try:
        text = read_submission(stamp, submission.trusted, limit=4096).decode("utf-8", "replace").strip()[:40]
    except (NotASubmission, OSError):
        return None
    from nbgrader.utils import parse_utc

    try:
        parse_utc(text)
    except Exception:
        log.warning("%s: timestamp.txt is not a time (%r): recorded without one", submission.student, text)
        return None
    return text or None


def run_batch(submissions: list[Submission], assignment: str, out: str, *, workers: int = 2,
              limits: Limits | None = None, only: list[str] | None = None,
              gradebook: NbgraderGradebook | None = None, force: bool = False,
              on_done=None, executor=None) -> list[Outcome]:
    """Grade `submissions` (keeping those already graded), writing each results.json as it
    finishes; `on_done(outcome)` is called after each. Returns every outcome.

    `executor` runs the gradings: by default a pool of `workers` threads here, each running
    `grade_one`; or a `dask.distributed.Client`. Either way results are written here."""
    limits = limits or Limits()
    digests = {s.student: s.digest() for s in submissions}
    recorder = _Recorder(assignment, out, only, digests, gradebook, on_done)
    pending: list[Submission] = []
    for s in submissions:
        stored = _stored(out, s.student)
        if s.refusal or s.path is None:  # nothing to grade: no run needed
            why = s.refusal or f"no submission: {s.note or 'no file'}"
            if not force and _same_refusal(stored, assignment, why, only):
                recorder.keep(Outcome(s, stored, "kept"))
            else:
                recorder.finish(s, SubmissionResult.failed(assignment, s.path or "", why,
                                                           graders_fault=False, only=only), "graded")
        elif not force and is_current(stored, assignment, digests[s.student], only):
            recorder.keep(Outcome(s, stored, "kept"))
        else:
            pending.append(s)
    own = executor is None
    pool = cf.ThreadPoolExecutor(max_workers=max(1, workers)) if own else executor
    try:
        _grade_until_done(pending, pool, recorder, limits, max(1, workers))
    except BaseException:  # Ctrl-C: stop now, not after every grading already queued
        if own:
            _stop_gradings(pool)
        raise
    finally:
        if own:
            pool.shutdown()
    return [recorder.outcomes[s.student] for s in submissions]


def _stop_gradings(pool: cf.ThreadPoolExecutor) -> None:
    """Cancel the gradings not started and kill those running (each a process group of its
    own) until the pool's threads are done; what they graded is not recorded."""
    pool.shutdown(wait=False, cancel_futures=True)
    waiting = threading.Thread(target=pool.shutdown)  # returns when the running gradings have ended
    waiting.start()
    while waiting.is_alive():
        with _RUNNING_LOCK:
            running = list(_RUNNING)
        for proc in running:  # again and again: a thread may have started one since
            _kill_group(proc)
        waiting.join(0.1)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill a grading process and everything in its process group (it may have ended)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _grade_until_done(pending: list[Submission], pool, recorder: _Recorder, limits: Limits,
                      concurrent: int) -> None:
    """Grade `pending` on `pool`; a grading that fails is retried (MAX_RETRIES), then
    recorded as the graders' failure."""
    from .dask_grading import dask_dispatch, is_dask_client

    assignment, only = recorder.assignment, recorder.only
    if is_dask_client(pool):
        submit, as_completed = dask_dispatch(pool, assignment, limits, only, concurrent)
    else:
        submit = lambda s: pool.submit(grade_one, s.student, s.path, assignment, limits, only,  # noqa: E731
                                       concurrent, None, s.trusted)
        as_completed = cf.as_completed
    tries: dict[str, int] = {}
    while pending:
        futures = {submit(s): s for s in pending}
        pending = []
        for future in as_completed(futures):
            s = futures[future]
            try:
                result = future.result()
                result = result if isinstance(result, SubmissionResult) else SubmissionResult.from_json(result)
            except Exception as e:  # a Dask worker that died (KilledWorker), a lost connection...
                result = SubmissionResult.failed(assignment, s.path or "", f"{type(e).__name__}: {str(e)[:300]}",
                                                 graders_fault=True, only=only)
            if not (result.failure and result.failure.graders_fault):
                recorder.finish(s, result, "graded")
                continue
            tries[s.student] = tries.get(s.student, 0) + 1
            if tries[s.student] > MAX_RETRIES:
                message = (f"the graders could not grade this submission ({result.failure.message}); this "
                           f"is not the student's fault: rerun the batch to try it again")
                recorder.finish(s, SubmissionResult.failed(assignment, s.path or "", message,
                                                           graders_fault=True, only=only), "failed")
            else:
                log.info("grading %s failed (%s): retrying", s.student, result.failure.message)
                pending.append(s)


# --- the command line --------------------------------------------------------------------


def _at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m graders.batch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="nbgrader's submitted/ folder, or a folder of .ipynb/.py files")
    parser.add_argument("--assignment", "-a", required=True)
    parser.add_argument("-o", "--out", help="results folder (default: graded/<assignment> here)")
    parser.add_argument("--workers", "-j", type=_at_least_one, default=max(1, (os.cpu_count() or 2)),
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
    from .settings import add_arguments, add_log_level_argument

    add_log_level_argument(parser)
    add_arguments(parser)
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
    except SandboxUnavailable as e:
        console.print(f"[red]error[/red]: {e}")
        return False
    warning = limits.memory_warning(args.workers)
    if warning:
        console.print(f"[yellow]warning[/yellow]: {warning}")
    return True


def _open_gradebook(args) -> NbgraderGradebook | None:
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
    import distributed  # noqa: F401  (it sets its loggers to INFO when imported)

    from .dask_grading import dask_client

    # Two dozen lines of start-up and shut-down on every run: distributed's loggers follow
    # --log-level, like the kit's.
    logging.getLogger("distributed").setLevel(logging.getLogger().level)
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
                  TextColumn("{task.fields[last]}", markup=False), console=console, transient=False) as progress:
        task = progress.add_task(f"grading {args.assignment}", total=len(submissions), last="")

        def on_done(outcome: Outcome) -> None:
            counts[outcome.status] += 1
            progress.update(task, advance=1, last=f"{outcome.submission.student}: "
                                                  f"{outcome.result.score:g} ({outcome.status})")

        return run_batch(submissions, args.assignment, out, workers=args.workers, limits=limits,
                         only=args.only, gradebook=gradebook, force=args.force, on_done=on_done,
                         executor=client)


def _stop_at_the_first_ctrl_c() -> None:
    """The first Ctrl-C stops the batch (KeyboardInterrupt); later ones are ignored, so that
    a second press cannot break into the stopping (`_stop_gradings`, which kills the
    gradings in flight) and leave gradings running behind a traceback. Left alone when
    whoever started the batch ignores or handles SIGINT."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def first(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _stop_at_the_first_ctrl_c()
    start_logging(args)
    from rich.console import Console

    from assignments.contracts import ASSIGNMENTS

    from .settings import from_arguments

    if args.assignment not in ASSIGNMENTS:
        parser.error(f"unknown assignment {args.assignment!r}; known: {', '.join(sorted(ASSIGNMENTS))}")
    console = Console(width=max(110, Console().width))
    try:
        submissions = discover(args.source, args.assignment)
    except FileNotFoundError as e:
        parser.error(str(e))
    if not submissions:
        console.print(f"no submissions of {args.assignment} found under {args.source}: expected "
                      f"<student>/{args.assignment}/*.ipynb folders or .ipynb/.py files")
        return 1
    out = os.path.abspath(args.out or os.path.join("graded", args.assignment))
    if problem := unwritable_folder(out):
        parser.error(f"{problem}: pass -o a folder you can write")
    limits = from_arguments(args)
    if not _isolation_ok(args, limits, console):
        return 2
    try:
        gradebook = _open_gradebook(args)
    except GradebookMissing as e:
        parser.error(str(e))
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
    from assignments.contracts import get_assignment

    parts = [p for p in get_assignment(args.assignment).parts if not args.only or p.name in args.only]
    rows = [(o.submission.student, o.status, o.result) for o in outcomes]
    csv_path = os.path.join(out, GRADEBOOK_CSV)
    write_gradebook_csv(csv_path, rows, parts)
    summary_tables(rows, args.assignment, parts, console)
    rate = counts["graded"] / elapsed * 60 if counts["graded"] else 0.0
    console.print(f"{counts['graded']} graded ({rate:.1f} per minute with {n_workers} "
                  f"{'Dask ' if client else ''}worker(s)), {counts['kept']} kept from an earlier run "
                  f"(unchanged), {counts['failed']} the graders failed on (rerun to retry) in {elapsed:.0f} s")
    console.print(f"results: {out}/<student>/{RESULTS}; gradebook: {csv_path}"
                  + ("; nbgrader's database updated" if args.gradebook else ""))


if __name__ == "__main__":
    sys.exit(main())
