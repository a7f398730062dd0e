"""The hidden graders: judge submissions on exported artifacts, never on live objects.

Command line: ``python -m graders SUBMISSION --assignment problem1 [-o results.json]``.
"""
from .harness import Limits, grade_submission
from .results import PartResult, SubmissionResult

__all__ = ["Limits", "PartResult", "SubmissionResult", "grade_submission"]
