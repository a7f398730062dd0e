"""Supervising a sandboxed worker: start it, feed it, read and validate what it says, stop it
when a deadline passes or it breaks the protocol, and decide whom each failure costs.

Two ways to feed a worker:
- `run_worker`: one request, written whole (the export worker: the submission and its cases);
- `run_stream`: a header, then one job at a time from a `JobBoard` that several workers
  share (the judges: each artifact goes on the board as soon as the export produced it, so
  compiling overlaps tracing, and the first judge free takes it).
Either way a worker that dies or is stopped on a case costs that case (a strike for its
function; after `max_strikes`, that function's other cases are not run), one killed from
outside the sandbox is retried once, a new process takes over the cases left, and the
submission's budget bounds everything. Every decision is logged (`graders.supervisor`).
"""
from __future__ import annotations

import enum
import logging
import os
import queue
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .cgroups import WorkerCgroup
from .sandbox import (DEBUG_VARIABLE, Isolation, Resources, Slot, choose_isolation, host_env, isolated,
                      compile_worker_code, kill_user, limited, python_command)
from .sandboxed.protocol import (MAX_LINE_BYTES, Died, Event, Finished, ProtocolError, Ready, Start, Unanswered,
                                 read_event)

if TYPE_CHECKING:
    from .settings import Limits

log = logging.getLogger(__name__)
EXPORT_COMMAND = python_command("graders.sandboxed.export:main")
JUDGE_COMMAND = python_command("graders.sandboxed.judge:main")


class Stop(enum.Enum):
    """Why the supervisor stopped a worker."""

    BUDGET = "the submission used up its grading budget"
    CASE_TIMEOUT = "a case ran longer than its limit"
    STALL = "no progress for too long"
    VIOLATION = "it broke the grading protocol"


NOT_GRADED = f"not graded: {Stop.BUDGET.value}"
"""The result of a case the budget left no time for."""


@dataclass
class Deadlines:
    """How long a worker may take."""

    stall: float
    """Seconds without any event while it has work (a submission loading, a case running)."""
    case: float
    """Seconds from a case's start to its result."""
    end: float
    """time.monotonic() by which everything must be done (the submission's budget)."""


@dataclass(frozen=True)
class WorkerSetup:
    """Where and how a grading's workers run."""

    resources: Resources
    isolation: Isolation
    uid: int | None
    """The uid the workers run as (a grading's own, as root), or None."""
    cwd: str
    function_of: dict[str, str]
    """Case id -> the graded function it belongs to (strikes are counted per function)."""
    max_strikes: int


@dataclass
class WorkerRun:
    """What a worker reported, across restarts."""

    results: dict[str, Event] = field(default_factory=dict)
    """Case id -> its validated case event (`Exported`, `Judged`), or `Unanswered` made up here."""
    events: list[Event] = field(default_factory=list)
    """Every other event, in order (`Loaded`, `Finished`, and `Died` made up here)."""

    def fail(self, ids, message: str) -> None:
        for case_id in ids:
            self.results.setdefault(case_id, Unanswered(case_id, message))


# --- one worker process ------------------------------------------------------------------------


class WorkerProcess:
    """A worker started isolated and limited, in a memory cgroup of its own where one can be
    made; it reads its request on stdin. `stop` makes sure it and all it started are gone."""

    def __init__(self, command: list[str], setup: WorkerSetup):
        compile_worker_code()
        full, where = isolated(command, setup.isolation, setup.uid, setup.resources, setup.cwd)
        self.uid = setup.uid
        self.cgroup = WorkerCgroup.create(setup.resources.memory_bytes, setup.resources.processes)
        launch = limited(full, setup.resources)
        if self.cgroup is not None:
            launch = self.cgroup.command(launch)
        debug = os.environ.get(DEBUG_VARIABLE)
        self.popen = subprocess.Popen(launch, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=None if debug else subprocess.DEVNULL, cwd=where,
                                      env=host_env(setup.isolation), start_new_session=True)
        log.debug("started %s (pid %d, uid %s, cgroup %s)", command[-1][-60:], self.popen.pid,
                  self.uid, self.cgroup and self.cgroup.folders.get("memory"))

    def write(self, text: str) -> bool:
        """Write to its stdin; False when it is gone."""
        try:
            self.popen.stdin.write(text.encode())
            self.popen.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def close_input(self) -> None:
        try:
            self.popen.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def stop(self, ended_by_itself: bool) -> tuple[int, bool]:
        """End it and everything it started: (its exit status, did its memory cgroup kill
        something for going over the limit)."""
        if ended_by_itself:
            try:
                self.popen.wait(timeout=10)  # its stdout closed: let it exit, to read its real status
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)  # bwrap is the PID namespace's parent: all go
        except (ProcessLookupError, PermissionError):
            pass
        self.popen.wait()
        self.close_input()
        self.popen.stdout.close()
        if self.uid is not None:
            kill_user(self.uid)
        over_memory = False
        if self.cgroup is not None:
            over_memory = self.cgroup.oom_kills() > 0
            self.cgroup.close()
        return self.popen.returncode, over_memory

    def abandon(self) -> None:
        """Stop a worker started early that was never needed."""
        if self.popen.returncode is None:
            self.stop(False)


class Prepared:
    """A grading's own uid, work folder and export worker, made before it knows its submission:
    the worker's Python and JAX start-up (half a second) overlaps what the grading process does
    first (importing the contracts and pytest, collecting the graders, the hidden cases). It
    lives here, apart from those imports, so that `python -m graders` can make it first;
    `graders.run.grade` passes it on and `harness.grade_submission(prepared=...)` uses it;
    closing it stops a worker nobody used and frees the uid and the folder."""

    def __init__(self, limits: "Limits"):
        self.limits = limits
        self.isolation = choose_isolation(limits.sandbox)
        self._stack = ExitStack()
        try:
            uid = self._stack.enter_context(Slot()).uid
            work = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="grade-"))
            self.setup = WorkerSetup(Resources.of(limits), self.isolation, uid, work, {}, limits.max_strikes)
            self._export: WorkerProcess | None = WorkerProcess(EXPORT_COMMAND, self.setup)
            self._stack.callback(self._export.abandon)
        except BaseException:
            self._stack.close()
            raise

    def take_export(self) -> WorkerProcess | None:
        """The export worker started early, once (a second grading starts its own)."""
        export, self._export = self._export, None
        return export

    def __enter__(self) -> "Prepared":
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()


# --- one attempt: reading a process's events --------------------------------------------------


@dataclass
class Attempt:
    """One worker process's progress, as its events tell it."""

    current: str | None = None
    """The case it started and has not answered yet."""
    case_started: float = 0.0
    finished: bool = False
    stop: Stop | None = None
    """Why the supervisor stopped it (None: it ended by itself)."""
    violation: str = ""
    progressed: bool = False
    """It answered at least one case."""

    def apply(self, event: Event, run: WorkerRun) -> None:
        if isinstance(event, Start):
            if self.current is not None:
                raise ProtocolError("a case started before the previous one ended")
            self.current, self.case_started = event.id, time.monotonic()
        elif event.name == "case":
            if self.current not in (None, event.id):
                raise ProtocolError("a result for a case other than the one running")
            run.results[event.id] = event
            self.current, self.progressed = None, True
        elif isinstance(event, Finished):
            self.finished = True
            run.events.append(event)
        elif event.name not in ("progress", "ready"):
            run.events.append(event)


def read_events(process: WorkerProcess, attempt: Attempt, run: WorkerRun, known, kind: str,
                deadlines: Deadlines, on_event=None, busy=lambda: True,
                reports: frozenset[str] = frozenset()) -> None:
    """Read and validate the worker's events until it ends, or a deadline or a violation stops
    it. `known()` gives the case ids it may speak of (`reports`: those answered by an eager
    report, `protocol.read_event`); `on_event(event)` sees each validated
    event; the stall deadline counts only while `busy()` (a judge waiting for its next job is
    not stalled)."""
    selector = selectors.DefaultSelector()
    selector.register(process.popen.stdout, selectors.EVENT_READ)
    buffer, last_event = b"", time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if now > deadlines.end:
                attempt.stop = Stop.BUDGET
            elif attempt.current and now - attempt.case_started > deadlines.case:
                attempt.stop = Stop.CASE_TIMEOUT
            elif now - last_event > deadlines.stall and busy():
                attempt.stop = Stop.STALL
            if attempt.stop:
                return
            if not selector.select(timeout=0.25):
                if not busy():
                    last_event = time.monotonic()
                continue
            chunk = os.read(process.popen.stdout.fileno(), 1 << 20)
            if not chunk:
                return  # the worker closed its end: it ended
            buffer += chunk
            if len(buffer) > MAX_LINE_BYTES:
                attempt.stop, attempt.violation = Stop.VIOLATION, "an event line longer than the protocol allows"
                return
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    event = read_event(line, set(known()) - set(run.results), kind, reports)
                    attempt.apply(event, run)
                except ProtocolError as e:
                    attempt.stop, attempt.violation = Stop.VIOLATION, str(e)
                    return
                if on_event:
                    on_event(event)
                last_event = time.monotonic()
    finally:
        selector.close()


# --- what ended an attempt, and whom it costs ---------------------------------------------------


@dataclass(frozen=True)
class Ending:
    """What ended a worker early, in words a student can act on."""

    message: str
    from_outside: bool = False
    """Killed from outside the sandbox (not the submission's doing): retried once."""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def ending(attempt: Attempt, returncode: int, over_memory: bool, resources: Resources,
           deadlines: Deadlines) -> Ending:
    """Why a worker stopped before finishing. bwrap reports a child killed by signal N as
    exit code 128 + N."""
    if attempt.stop is Stop.BUDGET:
        return Ending(Stop.BUDGET.value)
    if attempt.stop is Stop.VIOLATION:
        return Ending(f"the submission wrote to the graders' channel something that is not part of "
                      f"the grading protocol ({attempt.violation})")
    if attempt.stop is Stop.CASE_TIMEOUT:
        return Ending(f"it ran longer than {deadlines.case:g} s and was stopped (an infinite loop, or "
                      f"code that blocks the time limit?)")
    if attempt.stop is Stop.STALL:
        return Ending(f"it made no progress for {deadlines.stall:g} s and was stopped (an infinite loop?)")
    if over_memory:
        return Ending(f"it used more than its memory limit of {resources.memory_bytes / 2**30:g} GiB "
                      f"(everything it holds counts: its processes, files in /tmp, shared memory) and "
                      f"was stopped; keep arrays to the sizes the problem needs")
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if number == signal.SIGKILL:
        return Ending("the process was killed from outside the sandbox (SIGKILL: the machine ran out "
                      "of memory, or an administrator stopped it); it was retried once", from_outside=True)
    if number == signal.SIGXCPU:
        return Ending(f"the process used up its {resources.cpu_seconds} s of CPU time")
    if number:
        return Ending(f"the process crashed with {_signal_name(number)} (out of memory? the limit is "
                      f"{resources.memory_bytes / 2**30:g} GiB)")
    return Ending(f"the process exited with code {returncode} before finishing (os._exit? sys.exit?)")


@dataclass
class Strikes:
    """Failures per graded function, and the cases already retried after an outside kill."""

    setup: WorkerSetup
    by_function: dict[str, list[str]] = field(default_factory=dict)
    retried: set[str] = field(default_factory=set)

    def struck_out(self, case_id: str) -> str | None:
        """Why `case_id` is not to be run (its function already failed too often), or None."""
        name = self.setup.function_of.get(case_id, "")
        seen = self.by_function.get(name, [])
        if len(seen) >= self.setup.max_strikes:
            return f"not run: {self.setup.max_strikes} earlier cases of {name} already failed ({seen[-1]})"
        return None

    def blame(self, run: WorkerRun, attempt: Attempt, end: Ending, left: list[str]) -> None:
        """Record why a worker stopped early: against the case it was on (a strike for its
        function), or against every case `left` when it stopped before answering any."""
        case = attempt.current or ""  # "": between cases, or while loading the submission
        if end.from_outside and case not in self.retried:
            self.retried.add(case)
            log.info("worker killed from outside on %r: retrying once", case or "(loading)")
            return
        if not case:
            if not attempt.progressed:  # retrying would only do the same again
                log.info("worker failed before any case: %s", end.message)
                run.fail(left, f"the submission could not be run: {end.message}")
                run.events.append(Died(end.message))
            return
        log.info("case %s failed: %s", case, end.message)
        run.results[case] = Unanswered(case, end.message)
        self.by_function.setdefault(self.setup.function_of.get(case, ""), []).append(end.message)
        for other in left:
            why = self.struck_out(other)
            if why and other not in run.results:
                run.results[other] = Unanswered(other, why)


def _finish(process: WorkerProcess, attempt: Attempt, run: WorkerRun, strikes: Strikes,
            left: list[str], deadlines: Deadlines, resources: Resources) -> None:
    returncode, over_memory = process.stop(attempt.stop is None)
    if attempt.finished and attempt.stop is None:
        return
    end = ending(attempt, returncode, over_memory, resources, deadlines)
    log.debug("worker ended early (%s): %s", attempt.stop, end.message)
    strikes.blame(run, attempt, end, left)


# --- feeding a worker -------------------------------------------------------------------------


def run_worker(command: list[str], request_for, case_ids: list[str], *, kind: str,
               deadlines: Deadlines, setup: WorkerSetup, on_result=None,
               started: WorkerProcess | None = None, reports: frozenset[str] = frozenset()) -> WorkerRun:
    """Run a worker on one whole request until every case in `case_ids` has a result.
    `request_for(skip)` makes the request line, given the case ids already done (a new
    process after a failure skips them). `on_result(event)` sees each case result as it comes.
    `started`: its first process, started earlier so that its start-up overlapped other work."""
    run, strikes = WorkerRun(), Strikes(setup)
    while (pending := [i for i in case_ids if i not in run.results]):
        if time.monotonic() > deadlines.end:
            run.fail(pending, NOT_GRADED)
            break
        attempt, process = Attempt(), started or WorkerProcess(command, setup)
        started = None
        process.write(request_for(sorted(run.results)))
        process.close_input()
        read_events(process, attempt, run, lambda: case_ids, kind, deadlines,
                    on_event=lambda e: on_result and e.name == "case" and on_result(e), reports=reports)
        _finish(process, attempt, run, strikes, [i for i in case_ids if i not in run.results],
                deadlines, setup.resources)
    return run


_CLOSED = object()


class JobBoard:
    """Jobs for a set of streamed workers (a grading's judges), put while they are produced
    (`put`, then `close`), each taken by the first worker that is free (`take`). A job may
    name its `program` (what a worker compiles: an artifact on a mesh): the program then
    belongs to the worker that took its first job, and its other jobs wait for that worker,
    so that it is compiled once."""

    def __init__(self):
        self._changed = threading.Condition()
        self._waiting: list[tuple[object, str, str]] = []  # (program, case id, line), oldest first
        self._owner: dict[object, int] = {}
        self._closed = False

    def put(self, case_id: str, line: str, program: object = None) -> None:
        with self._changed:
            self._waiting.append((program if program is not None else case_id, case_id, line))
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def take(self, worker: int, timeout: float):
        """The next (case id, line) for `worker`: a job of a program it owns, else the oldest
        job of a program nobody owns yet (which it then owns); `_CLOSED` when the board is
        closed and holds nothing it may take; None if nothing came in `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: self._next(worker), timeout)

    def _next(self, worker: int):
        mine = [i for i, (p, _, _) in enumerate(self._waiting) if self._owner.get(p) == worker]
        free = [i for i, (p, _, _) in enumerate(self._waiting) if p not in self._owner]
        if not (mine or free):
            return _CLOSED if self._closed else None
        program, case_id, line = self._waiting.pop((mine or free)[0])
        self._owner.setdefault(program, worker)
        return case_id, line


class _Feeder(threading.Thread):
    """Writes one worker process's jobs while the supervisor reads its events (a blocked write
    must never stop the reading). Once the process says it is ready, it writes one job at a
    time, the next when the process has answered the last: the jobs to resend first, then
    the board's, until the board closes or the process goes away. So a job waits on the
    board, where any free worker can take it, never behind a worker still starting or busy."""

    def __init__(self, process: WorkerProcess, header: str, resend: list, board: JobBoard, worker: int,
                 run: WorkerRun, strikes: Strikes, sent: dict):
        super().__init__(daemon=True)
        self.process, self.header, self.resend, self.board, self.worker = process, header, resend, board, worker
        self.run_, self.strikes, self.sent = run, strikes, sent
        self.closed = False
        """The board closed and every job went to this process."""
        self.ready = False
        self.outstanding: set[str] = set()
        """Case ids written to this process and not yet answered."""
        self.halted = False
        self.changed = threading.Condition()

    def note(self, event: Event) -> None:
        """An event of this process (from the reading thread)."""
        with self.changed:
            if isinstance(event, Ready):
                self.ready = True
            elif event.name == "case":
                self.outstanding.discard(event.id)
            self.changed.notify_all()

    def halt(self) -> None:
        with self.changed:
            self.halted = True
            self.changed.notify_all()

    def busy(self) -> bool:
        """Starting, or holding a job: the stall deadline counts (not while it waits for work)."""
        return not self.ready or bool(self.outstanding)

    def run(self) -> None:
        if not self.process.write(self.header):
            return
        backlog = list(self.resend)
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.halted or (self.ready and not self.outstanding))
                if self.halted:
                    return
            item = backlog.pop(0) if backlog else self.board.take(self.worker, timeout=0.2)
            if item is None:
                continue
            if item is _CLOSED:
                self.closed = True
                self.process.close_input()
                return
            case_id, line = item
            why = self.strikes.struck_out(case_id)
            if why:  # its function already failed too often: do not run it
                self.run_.results.setdefault(case_id, Unanswered(case_id, why))
                continue
            self.sent[case_id] = line
            with self.changed:
                self.outstanding.add(case_id)
            if not self.process.write(line):
                return  # gone: the next process gets what is left in `sent`


class WorkerNeverReady(RuntimeError):
    """A streamed worker ended twice before saying it was ready: it runs no student program
    before then, so this is the graders' failure (a broken installation), not the submission's."""


def run_stream(command: list[str], header: str, board: JobBoard, *, kind: str, deadlines: Deadlines,
               setup: WorkerSetup, worker: int = 0, started: WorkerProcess | None = None,
               on_result=None) -> WorkerRun:
    """Run worker number `worker` of `board`'s workers, fed job by job, until the board is
    closed and every job it took has a result. `started`: its first process, started earlier
    so that its start-up overlapped other work."""
    run, strikes = WorkerRun(), Strikes(setup)
    sent: dict[str, str] = {}  # case id -> job line, for every job written to some process
    closed, never_ready = False, 0
    while True:
        unanswered = [i for i in sent if i not in run.results]  # no feeder runs here
        if closed and not unanswered:
            return run
        if time.monotonic() > deadlines.end:
            _drain(board, worker, run, closed, unanswered)
            return run
        process, attempt = started or WorkerProcess(command, setup), Attempt()
        started = None
        resend = [(i, sent[i]) for i in unanswered] + ([_CLOSED] if closed else [])
        feeder = _Feeder(process, header, resend, board, worker, run, strikes, sent)
        feeder.start()

        def note(event, feeder=feeder):
            feeder.note(event)
            if on_result and event.name == "case":
                on_result(event)

        # The feeder adds to `sent` while these read it: each reads a snapshot (`list(sent)`,
        # one step under the GIL), never the dict while it grows.
        read_events(process, attempt, run, lambda: list(sent), kind, deadlines, on_event=note, busy=feeder.busy)
        feeder.halt()
        _finish(process, attempt, run, strikes, [i for i in list(sent) if i not in run.results],
                deadlines, setup.resources)
        feeder.join()
        closed = closed or feeder.closed
        never_ready = 0 if feeder.ready else never_ready + 1
        if never_ready == 2 and attempt.stop is not Stop.BUDGET:
            raise WorkerNeverReady(f"the {kind} stopped twice before it was ready "
                                   f"({ending(attempt, process.popen.returncode, False, setup.resources, deadlines).message})")


def _drain(board: JobBoard, worker: int, run: WorkerRun, closed: bool, unanswered: list[str]) -> None:
    """The budget is gone: every job held or still to come fails with that reason."""
    message = NOT_GRADED
    run.fail(unanswered, message)
    while not closed:
        item = board.take(worker, timeout=1.0)
        if item is _CLOSED or item is None:
            closed = item is _CLOSED or closed
            if item is None:
                continue
        else:
            run.fail([item[0]], message)
