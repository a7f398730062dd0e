"""The files of the corpora whose subject is the sandbox or the batch (`grading.SANDBOXED`:
hangs, crashes, forged events, output floods, files, the network, binary and truncated
files), the solution and the untouched stub, graded into one folder by
`python -m graders.batch` with small time limits, once per session (`tests/grading.py`
`CorpusBatch`): each with its verdict (`grading.CORPUS_VERDICTS`), each fault in detail, and
a batch that finishes whatever its submissions do. The corpora's other files (one function
wrong, missing, of the wrong signature; malformed notebooks) are graded in the test process
by test_graders_problem1.py, on both stacks, and so are the sandbox's faults that go through
JAX (`grading.JAX_FAULTS`), each in the sandbox. What this module tests is the sandbox's and the
batch's, the same on any Python or JAX (marker `stack_neutral`; `.ci/run` runs it on Python
3.11 only).
"""
from __future__ import annotations

import csv
import json
import os
import re

import pytest

from graders.results import read_results
from grading import (BATCH_STUDENTS, CORPUS_VERDICTS, PROBLEM1_POINTS, assert_only_broken, assert_verdict,
                     expected_score, failing_cases)


pytestmark = [pytest.mark.slow, pytest.mark.stack_neutral]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem1")
FAULTS = os.path.join(REPO_ROOT, "tests", "submissions", "faults")


@pytest.fixture(scope="module")
def batch(problem1_batch):
    """The batch's folder, graded once per session (the session fixture `problem1_batch`,
    shared with test_report_corpora.py)."""
    import pathlib

    return pathlib.Path(problem1_batch.out), problem1_batch.accepted, problem1_batch.stdout


def test_every_submission_gets_its_verdict(batch):
    """Does the batch grade each of its students, each with its expected score and message?"""
    out, _, _ = batch
    with open(out / "gradebook.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(BATCH_STUDENTS) == set(os.listdir(out)) - {"gradebook.csv"}
    for student in sorted(BATCH_STUDENTS):
        result = read_results(str(out / student / "results.json"))
        assert_verdict(result, student)
        assert float(rows[student]["score"]) == pytest.approx(result.score)
        assert rows[student]["status"] == "graded"


def test_the_batch_never_stops(batch):
    """Is every submission graded (none left to a rerun, none a grader failure)?"""
    _, _, stdout = batch
    assert re.search(rf"{len(BATCH_STUDENTS)} graded .* 0 kept .* 0 the graders failed on", " ".join(stdout.split()))


def test_isolated_faults(batch):
    """Can a submission neither plant files in the kit or JAX, nor connect to a local port,
    nor read the solutions, while its right functions keep their marks?"""
    out, accepted, _ = batch
    assert accepted == 0, "the network fault reached the test's listening socket"
    results = json.loads((out / "reads_solutions" / "results.json").read_text())
    assert results["score"] == 0
    writes = json.loads((out / "writes_files" / "results.json").read_text())
    assert writes["score"] == expected_score("writes_files") and "While running" not in writes["output"]


def test_every_corpus_file_has_a_verdict():
    """Is every file of the corpora in CORPUS_VERDICTS (so none is silently untested), and is every
    file the batch grades one of them?"""
    names = {os.path.splitext(n)[0] for n in os.listdir(FAULTS)}
    corpus = {os.path.splitext(n)[0] for n in os.listdir(CORPUS) if n.endswith(".py")}
    assert names | corpus | {"solution", "stub"} == set(CORPUS_VERDICTS)
    assert BATCH_STUDENTS <= set(CORPUS_VERDICTS)


# --- each fault, in detail ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def grade(problem1_batch):
    """grade(name) -> that student's result as the batch wrote it."""
    return problem1_batch.result


# --- hangs, crashes, memory, output --------------------------------------------------------


def test_infinite_loop_while_tracing_costs_only_that_function(grade):
    """Does `while True: pass` in one function cost that function only, each case timed out?"""
    result = grade("loop_while_tracing")
    assert_only_broken(result, "shard_average_shard_map", 0,
                       r"tracing shard_average_shard_map took longer than 2 s: an infinite loop")
    assert len(failing_cases(result, "shard_average_shard_map")) == 6
    assert result.messages == []


def test_infinite_loop_at_top_level(grade):
    """Is a top-level infinite loop stopped, keeping the functions defined before it?"""
    result = grade("loop_top_level")
    assert len(result.messages) == 1
    assert re.search(r"submission ran longer than 3 s and was stopped", result.messages[0])
    for name in ("shard_average_jit", "shard_average_shard_map", "block_average_jit"):
        assert result.part(name).passed, result.part(name).output
    for name in ("block_average_shard_map", "roll_diff"):  # defined after the loop
        part = result.part(name)
        assert part.score == 0
        assert re.search(rf"function {name} was not defined", part.output)
        assert re.search(r"note: while running your submission: .*ran longer than 3 s", part.output)
    assert result.score == expected_score("loop_top_level")


def test_crash_costs_only_the_case_it_was_on(grade):
    """When the process dies while tracing one case, is only that case lost (and the rest graded)?"""
    result = grade("crash_one_case")
    assert_only_broken(result, "roll_diff", 0.9,
                       r"the process exited with code 3 before finishing")
    assert [c.case.mesh for c in failing_cases(result, "roll_diff")] == [(4, 2)]


def test_hang_that_blocks_the_time_limit_is_killed(grade):
    """Does the stall watchdog kill a hang that blocks SIGALRM, blaming only that case?"""
    result = grade("hang_blocks_alarm")
    assert_only_broken(result, "roll_diff", 0.9,
                       r"(ran longer than|made no progress for) \d+ s and was stopped \(an infinite loop")
    assert [c.case.mesh for c in failing_cases(result, "roll_diff")] == [(4, 2)]


def test_huge_printed_output(grade):
    """Does a submission printing 50 MB while importing still grade normally?"""
    result = grade("huge_output")
    assert result.score == sum(PROBLEM1_POINTS.values())
    assert result.messages == []
    gradescope = json.dumps(result.to_gradescope())
    assert "xxxxxxxxxx" not in gradescope and len(gradescope) < 20_000


# --- forged events and the solutions on disk --------------------------------------------------


def test_forged_events_do_not_crash_the_grader(grade):
    """Do forged and malformed lines on the worker's pipe leave the grader standing, and earn nothing?"""
    result = grade("forge_events")
    assert result.score == 0
    for part in result.parts:
        assert re.search(r"wrote to the graders' channel something that is not part of the "
                         r"grading protocol", part.output), part.output


def test_reading_the_solutions_from_disk_gets_nothing(grade):
    """Does executing solutions/problem1.py read as a file (not imported) get no marks?"""
    result = grade("reads_solutions")
    assert result.score == 0
    assert any("FileNotFoundError" in p or "No such file" in p for p in result.messages), result.messages
