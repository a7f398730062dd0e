"""A grader for the tests that grades each submission once per test module."""
from __future__ import annotations

import os

from graders import Limits, SubmissionResult, grade_submission


def cached_grader(assignment: str, corpus: str, limits: Limits):
    """grade(name_or_path, limits=None, only=None) -> SubmissionResult, cached.

    A bare name is a file of the corpus (`<corpus>/<name>.py`)."""
    cache: dict[tuple, SubmissionResult] = {}

    default = limits

    def grade(submission: str, limits: Limits | None = None,
              only: list[str] | None = None) -> SubmissionResult:
        chosen = limits or default
        path = submission if os.sep in submission else os.path.join(corpus, submission + ".py")
        key = (path, chosen, tuple(only or ()))
        if key not in cache:
            cache[key] = grade_submission(path, assignment, limits=chosen, only=only)
        return cache[key]

    return grade
