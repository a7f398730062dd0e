"""Grading for the kit's tests: each submission graded once per test session.

Every test module that asserts on a corpus file or a solution shares one grading of it: the
cache is keyed by the file's bytes, the assignment, the limits and the functions graded, so a
file graded by two modules (or under two names) is graded once.
"""
from __future__ import annotations

import hashlib
import os

from graders.harness import grade_submission
from graders.results import SubmissionResult
from graders.settings import Limits

_GRADED: dict[tuple, SubmissionResult] = {}


def graded(path: str, assignment: str, limits: Limits | None = None,
           only: list[str] | None = None) -> SubmissionResult:
    """The cases' verdict on the file at `path` (`grade_submission`), graded once per session."""
    limits = limits or Limits()
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    key = (digest, os.path.splitext(path)[1], assignment, limits.key(), tuple(only or ()))
    if key not in _GRADED:
        _GRADED[key] = grade_submission(path, assignment, limits=limits, only=only)
    return _GRADED[key]


def cached_grader(assignment: str, corpus: str, limits: Limits):
    """grade(name_or_path, limits=None, only=None) -> SubmissionResult, from the session's
    cache. A bare name is a file of the corpus (`<corpus>/<name>.py`)."""
    default = limits

    def grade(submission: str, limits: Limits | None = None, only: list[str] | None = None) -> SubmissionResult:
        path = submission if os.sep in submission else os.path.join(corpus, submission + ".py")
        return graded(path, assignment, limits or default, only)

    return grade
