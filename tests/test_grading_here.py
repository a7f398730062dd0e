"""The rule corpora are graded in the test process (`tests/grading.py` `graded_here`: the
workers' own code without their processes and sandbox). Is that the graders' verdict?"""
from __future__ import annotations

import os

import nbformat
import pytest
from grading import CONCURRENT, graded_here, submission_file

from graders import Limits, grade_submission

pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = Limits(cell_timeout=20, case_timeout=20, stall_timeout=60)
SAMPLES = [  # an eagerly graded part, a rule that fails, a notebook with a cell that does not compile
    ("warmup", "tests/submissions/warmup/place_bf16_roundtrip.py", ["place", "total_sum"]),
    ("problem4", "tests/submissions/problem4/bidir_uneven_split.py", ["allgather_matmul_bidirectional"]),
    ("problem3", "graders/samples/problem3_mistakes.py", ["allgather_matmul", "transformer_block"]),
    # an overlay replacing allgather_matmul: reducescatter_matmul is the solution's (its verdicts
    # are the solution's, `left_as_the_solution`), transformer_block calls the replacement
    ("problem3", "tests/submissions/problem3/gather_then_matmul.py", ["reducescatter_matmul", "transformer_block"]),
]


def comparable(result) -> dict:
    """Everything a student, a gradebook or a report reads: not the timings or the isolation."""
    data = result.to_json()
    return {k: v for k, v in data.items() if k not in ("timings", "isolation", "execution_time")}


@pytest.mark.parametrize("assignment, path, only", SAMPLES, ids=[os.path.basename(s[1])[:-3] for s in SAMPLES])
def test_grading_here_is_grading(assignment, path, only, tmp_path):
    """Does grading a file in this process give exactly what the sandboxed graders give it:
    every part's score and message, every case's verdict, problems and program analysis?"""
    path = submission_file(os.path.join(REPO_ROOT, path))
    here = graded_here(path, assignment, FAST, only)
    sandboxed = grade_submission(path, assignment, limits=FAST, only=only, concurrent=CONCURRENT)
    assert comparable(here) == comparable(sandboxed)
    assert here.score < here.max_score  # each sample loses points: the verdicts compared are not all passes


def test_grading_here_reads_a_notebook_as_the_export_worker_does(tmp_path):
    """A notebook with a cell that does not compile: the same problems and scores both ways?"""
    nb = nbformat.read(os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb"), as_version=4)
    nb.cells.insert(3, nbformat.v4.new_code_cell("def broken(:\n    pass"))
    path = tmp_path / "problem1.ipynb"
    nbformat.write(nb, str(path))
    only = ["roll_diff"]
    here = graded_here(str(path), "problem1", FAST, only)
    assert comparable(here) == comparable(grade_submission(str(path), "problem1", limits=FAST, only=only,
                                                           concurrent=CONCURRENT))
    assert here.messages and "syntax error" in here.messages[0]


def test_a_judge_that_fails_blames_the_kit_not_the_submission(repo_root):
    """The judge's own code failing on a case (here: a job naming a part the assignment does not
    have) must not end the judge with "exited with code 1 (os._exit? sys.exit?)", which blames a
    submission that ran no Python there: the case fails with a message that blames the kit, the
    verdict is not cached (`ran` false), and the judge goes on to the next job."""
    import json
    import subprocess
    import sys

    from graders.sandboxed.protocol import request_text

    job = {"id": "x", "part": "no_such_part", "case": {"mesh": [2, 4], "sizes": {}, "statics": {}}, "inputs": []}
    stdin = request_text("judge", assignment="problem1") + json.dumps(job) + "\n" + json.dumps(dict(job, id="y")) + "\n"
    out = subprocess.run([sys.executable, "-c", "from graders.sandboxed.judge import main; main()"], input=stdin,
                         capture_output=True, text=True, cwd=repo_root, timeout=120)
    events = [json.loads(line) for line in out.stdout.splitlines()]
    cases = [e for e in events if e["event"] == "case"]
    assert [e["id"] for e in cases] == ["x", "y"] and events[-1]["event"] == "finished", out.stdout + out.stderr
    for e in cases:
        assert (e["values_ok"], e["rule_ok"], e["ran"]) == (False, False, False)
        [problem] = e["problems"]
        assert (problem["rule"], problem["kind"]) == ("E005", "run")
        assert problem["message"].startswith("the graders could not judge this case (KeyError") and \
            "a fault of the grading kit, not of your code" in problem["message"]
