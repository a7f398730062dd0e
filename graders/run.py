"""Grade a submission through the hidden pytest graders: the one path every command takes.

`python -m graders`, `graders.batch` (through it), nbgrader's `FillGradeCells` (through it)
and the Gradescope bundle all call `grade`, which runs `graders/test_<assignment>.py` with
pytest in this process (student code still runs only in the sandbox), so custom checks count
the same everywhere.
"""
from __future__ import annotations

import os

from .harness import Limits, limit_options
from .results import SubmissionResult

GRADERS_DIR = os.path.dirname(os.path.abspath(__file__))


class _Collector:
    """A pytest plugin that keeps the session's result."""

    def __init__(self):
        self.result: SubmissionResult | None = None

    def pytest_sessionfinish(self, session):
        from .pytest_plugin import GRADING

        results = session.config.stash[GRADING].results
        self.result = next(iter(results.values()), None)


def grade(submission: str, assignment: str, *, limits: Limits = Limits(),
          only: list[str] | None = None) -> SubmissionResult:
    """Grade one submission with `graders/test_<assignment>.py` (its cases and custom checks)."""
    import pytest

    module = os.path.join(GRADERS_DIR, f"test_{assignment}.py")
    args = [module, f"--submission={os.path.abspath(submission)}", "-o", "addopts=", "-p", "no:cacheprovider",
            "-p", "no:terminal", f"--rootdir={os.path.dirname(GRADERS_DIR)}", *limit_options(limits)]
    for name in only or ():
        args.append(f"--only={name}")
    collector = _Collector()
    code = pytest.main(args, plugins=[collector])
    if collector.result is None:
        raise RuntimeError(f"the pytest graders did not run ({module}: pytest exit code {code})")
    return collector.result
