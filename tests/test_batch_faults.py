"""Every broken submission of the corpus graded into one folder: each with its verdict, and a
batch that finishes whatever its submissions do.

The corpus is the problem1 corpus (`tests/submissions/problem1/`, each file's verdict looked at
in detail in test_graders_problem1.py, from this same grading), the extra faults of
`tests/submissions/faults/` (malformed and truncated notebooks, deleted and duplicated cells,
binary and empty files, a syntax error, a submission that writes files and one that tries the
network), the solution and the untouched stub, graded once per session (`tests/grading.py`
`CorpusBatch`): the files whose subject is the sandbox or the batch (`SANDBOXED`: hangs,
crashes, forged events, memory, files, the network, binary and truncated files), the solution
and the stub by `python -m graders.batch` with small time limits, the others in the test
process by the workers' own code.
"""
from __future__ import annotations

import csv
import json
import os
import re

import pytest

from graders.results import read_results
from grading import BATCH_STUDENTS


pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem1")
FAULTS = os.path.join(REPO_ROOT, "tests", "submissions", "faults")

# student -> (total score, {function: regex its output must match}); None: not checked
# because it depends on this machine's isolation (see the tests below).
EXPECTED = {
    "solution": (10, {}),
    "stub": (0, {"roll_diff": r"not implemented"}),
    # the problem1 corpus
    "comm_gather_roll": (9.0, {"roll_diff": r"communication observed: .*all-gather"}),
    "comm_whole_roll": (8.8, {"roll_diff": r"collective-permute over X"}),
    "compiled_infinite_loop": (2, {"shard_average_jit": r"running the compiled program: it ran longer than 5 s and was stopped"}),
    "crash_one_case": (9.8, {"roll_diff": r"exited with code 3"}),
    "forge_events": (0, {"roll_diff": r"not part of the grading protocol"}),
    "hang_blocks_alarm": (9.8, {"roll_diff": r"(made no progress for|ran longer than) \d+ s and was stopped"}),
    "hardcoded_mesh": (8.33, {"block_average_jit": r"cannot reshape array"}),
    "huge_output": (10, {}),
    "jit_part_uses_shard_map": (9, {"shard_average_jit": r"must use jax.jit only"}),
    "shard_map_over_x_only": (10, {}),
    "identity_shard_map": (9, {"shard_average_shard_map": r"must do its work inside its shard_map"}),
    "adds_of_slices_outside": (8, {"shard_average_shard_map": r"computes around it \(add of slices",
                                   "block_average_shard_map": r"computes around it \(add of slices"}),
    "loop_outside": (8, {"shard_average_shard_map": r"computes around it \(while outside",
                         "block_average_shard_map": r"computes around it \(while outside"}),
    "triangular_solve_outside": (9, {"shard_average_shard_map": r"computes around it \(custom call \w+ outside"}),
    "loop_top_level": (6, {"roll_diff": r"ran longer than 3 s and was stopped"}),
    "loop_while_tracing": (8, {"shard_average_shard_map": r"took longer than 2 s: an infinite loop"}),
    "memory_hog": (10, {}),
    "missing_function": (8, {"block_average_shard_map": r"was not defined; define it as"}),
    "nan_output": (8, {"block_average_shard_map": r"NaN element"}),
    "raises": (8, {"block_average_shard_map": r"raised while tracing: ValueError"}),
    "reads_solutions": (None, {}),
    "replicated_output": (8, {"shard_average_jit": r"wrong sharding: got P\(\)"}),
    "slice_roll": (9.4, {"roll_diff": r"values wrong"}),
    "tampering": (0, {"roll_diff": r"not implemented"}),
    "wrong_dtype": (8, {"shard_average_shard_map": r"wrong dtype: got bfloat16"}),
    "wrong_shape": (8, {"shard_average_jit": r"wrong shape: got \(16, 8\)"}),
    "returns_dict": (8, {"shard_average_shard_map": r"returned a dict; expected one array"}),
    "wrong_signature": (8, {"roll_diff": r"wrong signature"}),
    # tests/submissions/faults
    "truncated": (0, {"roll_diff": r"not a valid notebook \(Unterminated string.*save it again and resubmit"}),
    "not_a_notebook": (0, {"roll_diff": r"not a valid notebook \(it has no 'cells' list\)"}),
    "deleted_cells": (8, {"block_average_jit": r"function block_average_jit was not defined"}),
    "duplicated_cells": (8, {"shard_average_jit": r"values wrong: (some|most|every) elements? of the result differs?"}),
    "edited_setup_cell": (10, {}),  # the locked set-up cell runs as released (as nbgrader restores it)
    "empty": (0, {"roll_diff": r"function roll_diff was not defined; define it as roll_diff\(A, \*, mesh, shift\)"}),
    "binary": (0, {"roll_diff": r"submission has a syntax error: source code string cannot contain null bytes"}),
    "syntax_error": (0, {"roll_diff": r"submission has a syntax error at line 6: expected ':'"}),
    "writes_files": (10, {}),
    "network": (4, {"roll_diff": r"was not defined"}),
}

@pytest.fixture(scope="module")
def batch(problem1_batch):
    """The whole corpus in one folder, graded once per session (the session fixture
    `problem1_batch`, shared with test_graders_problem1.py)."""
    import pathlib

    return pathlib.Path(problem1_batch.out), problem1_batch.accepted, problem1_batch.stdout


def test_every_submission_gets_its_verdict(batch):
    """Does the batch grade every corpus file, each with its expected score and message?"""
    out, _, _ = batch
    with open(out / "gradebook.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(BATCH_STUDENTS) and set(os.listdir(out)) - {"gradebook.csv"} == set(EXPECTED)
    for student, (total, messages) in EXPECTED.items():
        results = json.loads((out / student / "results.json").read_text())
        assert read_results(str(out / student / "results.json")).failure is None or \
            not read_results(str(out / student / "results.json")).failure.graders_fault
        tests = {t["name"]: t for t in results["tests"]}
        if total is not None:
            assert results["score"] == pytest.approx(total), (student, results["output"])
        assert results["score"] == pytest.approx(sum(t["score"] for t in tests.values()))
        for name, pattern in messages.items():
            assert re.search(pattern, tests[name]["output"]), (student, tests[name]["output"])
            assert tests[name]["score"] < tests[name]["max_score"]
        if student in BATCH_STUDENTS:
            assert rows[student]["status"] == "graded"
            assert float(rows[student]["score"]) == pytest.approx(results["score"])


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
    assert writes["score"] == 10 and "While running" not in writes["output"]


def test_every_fault_file_is_in_the_batch():
    """Is every file of the corpora in EXPECTED (so none is silently untested), and is every
    file the batch grades one of them?"""
    names = {os.path.splitext(n)[0] for n in os.listdir(FAULTS)}
    corpus = {os.path.splitext(n)[0] for n in os.listdir(CORPUS) if n.endswith(".py")}
    assert names | corpus | {"solution", "stub"} == set(EXPECTED)
    assert BATCH_STUDENTS <= set(EXPECTED)
