"""Run a worker process that reports progress as JSON lines on its stdout, and survive it.

Both grading workers (the export worker, which runs student code, and the judge worker,
which runs student-compiled programs) follow one protocol: for each case it emits
``{"event": "start", "id": ...}`` then ``{"event": "case", "id": ..., ...}``, and
``{"event": "finished"}`` at the end. `run_worker` starts it in its own process group
(with no network and the kit's hidden folders masked, where the OS allows), kills it when
it makes no progress for `stall_timeout` seconds, blames the case it was on, and starts a
new worker for the cases that remain. Lines are read defensively: the export worker's
process also runs student code, which may write anything to its stdout.
"""
from __future__ import annotations

import functools
import json
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Masked (an empty tmpfs mounted over them) in a worker's mount namespace: nothing a
# submission may read. The student runtime (assignments/) and the environment stay.
MASKED = ("graders", "solutions", "source", "tests", ".git", "submitted", "autograded", "feedback")


@functools.lru_cache(maxsize=1)
def namespaces() -> tuple[str, ...]:
    """The unshare(1) flags this machine allows: network and mount namespaces, or fewer."""
    unshare = shutil.which("unshare")
    if not unshare:
        return ()
    with tempfile.TemporaryDirectory() as probe:
        mount = [unshare, "-n", "-m", "sh", "-c", f"mount -t tmpfs none {shlex.quote(probe)}"]
        if subprocess.run(mount, capture_output=True).returncode == 0:
            return ("-n", "-m")
    if subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return ("-n",)
    return ()


def isolation_note() -> str | None:
    """Why a worker is less isolated than designed, or None when fully isolated."""
    have = namespaces()
    if have == ("-n", "-m"):
        return None
    missing = [] if "-n" in have else ["the network"]
    missing.append("the kit's files (graders/, solutions/, ...)")
    return (f"could not make Linux namespaces here (unshare), so submissions can reach "
            f"{' and '.join(missing)}; grade as root on Linux for full isolation")


def read_only_roots() -> list[str]:
    """Folders the export worker may read but never write: the kit and the Python
    installation it runs (interpreter, standard library, site-packages with JAX)."""
    import site
    import sysconfig

    roots = [REPO_ROOT, sys.prefix, sys.base_prefix, sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    try:
        roots.append(site.getusersitepackages())
    except Exception:
        pass
    real = []
    for root in roots:
        root = os.path.realpath(root)
        if os.path.isdir(root) and root != "/" and root not in real:
            real.append(root)
    return real


def sandboxed(command: list[str], isolate: bool, mask: bool) -> list[str]:
    """`command` wrapped in `unshare` (no network; with `mask`, the hidden folders masked),
    where the OS allows."""
    flags = namespaces() if isolate else ()
    if not flags:
        return command
    if "-m" not in flags or not mask:
        return ["unshare", "-n", *command]
    targets = [os.path.join(REPO_ROOT, d) for d in MASKED if os.path.isdir(os.path.join(REPO_ROOT, d))]
    # The kit and the Python environment read-only first, so a submission cannot plant or
    # change files that later gradings import (the scratch folder stays writable).
    script = "".join(f"mount --bind {shlex.quote(r)} {shlex.quote(r)} && "
                     f"mount -o remount,bind,ro {shlex.quote(r)} && " for r in read_only_roots())
    script += "".join(f"mount -t tmpfs -o ro none {shlex.quote(t)} && " for t in targets)
    return ["unshare", *flags, "sh", "-c", script + 'exec "$@"', "sandbox", *command]


@dataclass
class WorkerRun:
    """What a worker reported, across restarts."""

    results: dict[str, dict] = field(default_factory=dict)
    """Case id -> its "case" event (or a failure made up here when the worker died on it)."""
    events: list[dict] = field(default_factory=list)
    """Every other well-formed event, in order (e.g. "loaded", "finished")."""


def _parse(line: bytes, known: set[str]) -> dict | None:
    try:
        event = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return None
    if "id" in event and not (isinstance(event["id"], str) and event["id"] in known):
        return None
    if "message" in event and not isinstance(event["message"], str):
        return None
    return event


def _why_stopped(returncode: int | None, killed: bool, stall_timeout: float, memory_bytes: int) -> str:
    if killed:
        return f"stopped after {stall_timeout:g} s without progress (an infinite loop?)"
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        hint = (f" (out of memory? the limit is {memory_bytes / 2**30:g} GiB)"
                if -returncode == signal.SIGKILL else "")
        return f"the process was killed by {name}{hint}"
    return f"the process running it exited with code {returncode} (os._exit? a crash in native code?)"


def run_worker(command: list[str], request: dict, case_ids: list[str], *, stall_timeout: float,
               memory_bytes: int, isolate: bool, mask: bool, env: dict, cwd: str) -> WorkerRun:
    """Run `command REQUEST.json` until every case in `case_ids` has a result."""
    known = set(case_ids)
    run = WorkerRun()
    for attempt in range(len(case_ids) + 1):
        pending = [i for i in case_ids if i not in run.results]
        if not pending:
            break
        request_path = os.path.join(cwd, f"request-{os.getpid()}-{time.monotonic_ns()}.json")
        with open(request_path, "w") as f:
            json.dump({**request, "skip": sorted(run.results)}, f)
        proc = subprocess.Popen(
            sandboxed([*command, request_path], isolate, mask), cwd=cwd, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so a kill takes its children too
        )
        started, finished, killed = None, False, False
        buffer = b""
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        last_progress = time.monotonic()
        while True:
            ready = selector.select(timeout=0.5)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break  # the worker closed its stdout: it ended
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = _parse(line, known)
                    if event is None:
                        continue
                    last_progress = time.monotonic()
                    kind = event["event"]
                    if kind == "start":
                        started = event.get("id")
                    elif kind == "case" and "id" in event:
                        run.results.setdefault(event["id"], event)
                        started = None
                    else:
                        finished = finished or kind == "finished"
                        run.events.append(event)
            elif time.monotonic() - last_progress > stall_timeout:
                killed = True
                break
        selector.close()
        if not killed:
            try:  # its stdout closed: let it finish exiting, to read its real exit status
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything it left running goes too
        except ProcessLookupError:
            pass
        proc.wait()
        proc.stdout.close()
        if finished and not killed:
            continue
        why = _why_stopped(proc.returncode, killed, stall_timeout, memory_bytes)
        if started is not None:
            run.results[started] = {"event": "case", "id": started, "status": "error", "message": why}
        else:  # it died before reaching a case: nothing more can be learned from retrying
            for i in pending:
                run.results.setdefault(i, {"event": "case", "id": i, "status": "error",
                                           "message": f"the submission could not be run: {why}"})
            run.events.append({"event": "died", "message": why})
    return run


def python_command(module_main: str) -> list[str]:
    """This Python, isolated from PYTHONPATH and the user's site, running `module:main`."""
    module, func = module_main.split(":")
    bootstrap = (f"import sys; sys.path.insert(0, {REPO_ROOT!r}); "
                 f"from {module} import {func}; sys.exit({func}(sys.argv[1]))")
    return [sys.executable, "-I", "-c", bootstrap]
