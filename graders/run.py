"""Grade a submission through the hidden pytest graders: the one path every command takes.

`python -m graders`, `graders.batch` (through it), nbgrader's `FillGradeCells` and the
Gradescope bundle all call `grade`, which runs `graders/test_<assignment>.py` with pytest in
this process (student code still runs only in the sandbox), so custom checks count the same
everywhere. The grading's settings travel to the pytest plugin as an object.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .results import SubmissionResult
from .settings import Limits

if TYPE_CHECKING:
    from .supervisor import Prepared

GRADERS_DIR = os.path.dirname(os.path.abspath(__file__))


class GradersDidNotRun(RuntimeError):
    """pytest could not run the hidden graders (a broken graders module, a missing one)."""


@dataclass(eq=False)  # a pytest plugin: hashed by identity
class GradingRequest:
    """What `grade` asks the pytest plugin (`graders.pytest_plugin`) to grade, and how; the
    plugin puts the session's result back in `result`."""

    submission: str
    limits: Limits
    concurrent: int = 1
    trusted_folder: str | None = None
    prepared: "Prepared | None" = None
    """The grading's uid, folder and export worker, made before pytest started (`supervisor.Prepared`)."""
    result: SubmissionResult | None = None
    error: Exception | None = None
    """What stopped the grading inside pytest (a failure of the graders), if anything did."""


def grade(submission: str, assignment: str, *, limits: Limits | None = None, only: list[str] | None = None,
          concurrent: int = 1, trusted_folder: str | None = None,
          prepared: "Prepared | None" = None) -> SubmissionResult:
    """Grade one submission with `graders/test_<assignment>.py` (its cases and custom checks).
    `concurrent`: gradings sharing this machine; `trusted_folder`: where the file must be
    reached from without links (see `graders.files.read_submission`); `prepared`: the
    grading's export worker started ahead (`supervisor.Prepared`, with these limits; closed
    here), else one is started first thing."""
    from .supervisor import Prepared

    limits = limits or (prepared.limits if prepared else Limits())
    with prepared or Prepared(limits) as prepared:  # the export worker starts while pytest loads and collects
        import pytest

        module = os.path.join(GRADERS_DIR, f"test_{assignment}.py")
        # No plugin but the request: other installed plugins (anyio's, ...) cost 0.2 s a grading.
        args = [module, "-o", "addopts=", "--disable-plugin-autoload", "-p", "no:cacheprovider",
                "-p", "no:terminal", f"--rootdir={os.path.dirname(GRADERS_DIR)}",
                *(f"--only={name}" for name in only or ())]
        request = GradingRequest(os.path.abspath(submission), limits, concurrent, trusted_folder, prepared)
        code = pytest.main(args, plugins=[request])
    if request.error is not None:
        raise GradersDidNotRun(f"the graders failed: {type(request.error).__name__}: {request.error}") from request.error
    if request.result is None:
        raise GradersDidNotRun(f"the pytest graders did not run ({module}: pytest exit code {code})")
    return request.result
