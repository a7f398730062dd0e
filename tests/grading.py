"""Grading for the kit's tests: each submission graded once per test session.

Every test module that asserts on a corpus file or a solution shares one grading of it: the
cache is keyed by the file's bytes, the assignment, the limits and the functions graded, so a
file graded by two modules (or under two names) is graded once.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os

from graders.harness import grade_submission
from graders.results import SubmissionResult
from graders.settings import Limits

_GRADED: dict[tuple, SubmissionResult] = {}
CONCURRENT = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
"""Gradings sharing the machine: one per xdist worker (`make test` runs 3 on 2 cores). The
harness sizes each grading's judges by it, as a batch does (`Limits.judges_for`): a second
judge per grading would only add its start-up to a machine that is already busy."""


def load_module(path: str):
    """A .py file (a solution module, a corpus submission) imported as a module of its own."""
    name = "loaded_" + os.path.splitext(os.path.basename(path))[0] + "_" + hashlib.sha256(path.encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def graded(path: str, assignment: str, limits: Limits | None = None,
           only: list[str] | None = None) -> SubmissionResult:
    """The cases' verdict on the file at `path` (`grade_submission`), graded once per session."""
    limits = limits or Limits()
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    key = (digest, os.path.splitext(path)[1], assignment, limits.key(), tuple(only or ()))
    if key not in _GRADED:
        _GRADED[key] = grade_submission(path, assignment, limits=limits, only=only, concurrent=CONCURRENT)
    return _GRADED[key]


def cached_grader(assignment: str, corpus: str, limits: Limits):
    """grade(name_or_path, limits=None, only=None) -> SubmissionResult, from the session's
    cache. A bare name is a file of the corpus (`<corpus>/<name>.py`)."""
    default = limits

    def grade(submission: str, limits: Limits | None = None, only: list[str] | None = None) -> SubmissionResult:
        path = submission if os.sep in submission else os.path.join(corpus, submission + ".py")
        return graded(path, assignment, limits or default, only)

    return grade


# --- the problem1 corpus, graded once per session by graders.batch ------------------------------

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem1")
FAULTS = os.path.join(REPO_ROOT, "tests", "submissions", "faults")
CORPUS_LIMITS = ["--cell-timeout", "3", "--case-timeout", "2", "--stall-timeout", "8", "--run-timeout", "10"]
"""Small limits, so that the corpus's hangs cost seconds."""
PLANTED = "planted_by_submission.txt"


class CorpusBatch:
    """The problem1 corpus, the fault corpus, the solution and the untouched stub in one folder,
    graded by `python -m graders.batch` (4 workers): `out` (results.json per student), `stdout`,
    `accepted` (connections the network fault made to a listening port: must be 0), and
    `result(name)`, each submission's `SubmissionResult` as the batch wrote it."""

    def __init__(self, root: str):
        import shutil
        import socket
        import subprocess
        import sys

        source = os.path.join(root, "submissions")
        os.makedirs(source)
        for folder in (CORPUS, FAULTS):
            for name in os.listdir(folder):
                shutil.copy(os.path.join(folder, name), os.path.join(source, name))
        shutil.copy(os.path.join(REPO_ROOT, "solutions", "problem1.py"), os.path.join(source, "solution.py"))
        shutil.copy(os.path.join(REPO_ROOT, "release", "problem1", "problem1.ipynb"), os.path.join(source, "stub.ipynb"))
        for path in planted_files():
            assert not os.path.exists(path), f"left over from an earlier run: {path}"
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        self.out = os.path.join(root, "graded")
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "graders.batch", "-a", "problem1", source, "-o", self.out,
                 "--workers", "4", *CORPUS_LIMITS], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
                env={**os.environ, "FAULT_LISTEN_PORT": str(server.getsockname()[1])})
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
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert not self.planted, f"a submission planted files in the kit or JAX: {self.planted}"
        self.stdout = proc.stdout

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
