"""The hidden graders: judge submissions on exported artifacts, never on live objects.

Command line: ``python -m graders SUBMISSION --assignment problem1 [-o results.json]``.

Who runs what (see the README's "Layout"):
- `graders.sandboxed`: the only part that runs inside the sandbox (the export worker, the
  judge, the multi-controller runs, their protocol); it imports `assignments` and nothing
  else of the graders.
- everything else here is trusted and runs in the grading process: the harness and its
  supervisor, the sandbox, the hidden cases, the results model, and the adapters to the
  command line, pytest, nbgrader, Gradescope and Dask.

The names below load on first use, so that a sandboxed worker importing
`graders.sandboxed` loads nothing else of the graders.
"""
from assignments.lazy import lazy_names

_WHERE = {
    "Limits": "settings", "grade_submission": "harness", "grade": "run",
    "SubmissionResult": "results", "PartResult": "results", "Check": "results",
    "read_results": "results", "write_results": "results",
}

__all__ = sorted(_WHERE)


__getattr__, __dir__ = lazy_names(__name__, _WHERE)
