"""Reading a submission's text inside the export worker (`graders.sandboxed.export.load_submission`),
on hand-built hostile files: each is refused or skipped with a message naming the fix, never a
crash of the worker (which the student would see as "the process exited")."""
from __future__ import annotations

import json

import pytest


def test_a_notebook_nested_too_deep_is_refused_with_the_fix():
    """A notebook whose JSON nests 200,000 lists (RecursionError in the parser): refused as not a
    valid notebook, with what to do."""
    from graders.sandboxed.export import SubmissionUnreadable, load_submission

    deep = '{"cells": ' + "[" * 200_000 + "]" * 200_000 + ', "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    with pytest.raises(SubmissionUnreadable, match="not a valid notebook.*save it again and resubmit"):
        load_submission("problem1.ipynb", deep, cell_timeout=5)


@pytest.mark.parametrize("text, reason", [
    ("[]", "no 'cells' list"),
    ('{"cells": 3}', "no 'cells' list"),
    ("{not json", "not a valid notebook"),
])
def test_malformed_notebooks_are_refused_with_the_fix(text, reason):
    from graders.sandboxed.export import SubmissionUnreadable, load_submission

    with pytest.raises(SubmissionUnreadable, match=reason):
        load_submission("problem1.ipynb", text, cell_timeout=5)


def test_a_module_nested_too_deep_is_skipped_and_the_rest_runs():
    """A notebook cell too deeply nested to compile is skipped with a message; the next runs."""
    from graders.sandboxed.export import load_submission

    cells = [{"cell_type": "code", "source": "x = " + "(" * 100_000 + ")" * 100_000, "metadata": {}},
             {"cell_type": "code", "source": "y = 2", "metadata": {}}]
    namespace, problems = load_submission("problem1.ipynb", json.dumps({"cells": cells}), cell_timeout=5)
    assert namespace["y"] == 2
    assert len(problems) == 1 and "skipped" in problems[0], problems
