"""problem3: collective matmuls graded on their compiled communication, across meshes."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from grading import cached_grader

from assignments.contract import Case
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis
from assignments.rules import SplitReduction
from graders import Limits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem3")
POINTS = {"allgather_matmul": 2, "allreduce_matmul": 3, "reducescatter_matmul": 4, "transformer_block": 1}
LIMITS = Limits(cell_timeout=30, case_timeout=30, stall_timeout=60)


@pytest.fixture(scope="module")
def grade():
    return cached_grader("problem3", CORPUS, LIMITS)


def scores(result) -> dict[str, float]:
    return {p.name: p.score for p in result.parts}


def test_solution_full_marks_as_module_and_notebook(grade):
    """Do the solutions, as a module and as the solved notebook, get every point on every mesh?"""
    for path in ("solutions/problem3.py", "solutions/problem3/problem3.ipynb"):
        result = grade(os.path.join(REPO_ROOT, path))
        assert scores(result) == POINTS, result.to_text()


def test_stub_scores_zero(grade):
    """Does the released notebook, untouched, score 0 with 'not implemented'?"""
    result = grade(os.path.join(REPO_ROOT, "release", "problem3", "problem3.ipynb"))
    assert result.score == 0
    assert all("not implemented" in p.output for p in result.parts)


def test_any_direction_and_unrolled_loops_earn_full_marks(grade):
    """Is a ring turning the other way, with its loop unrolled, graded the same (the property, not one implementation)?"""
    assert scores(grade("unrolled_reverse_ring")) == POINTS


def test_plain_jit_keeps_values_loses_communication(grade):
    """Does plain jax.jit get the values half and lose communication, with the collective named?"""
    result = grade("plain_jit")
    for part in result.parts:
        values = sum(c.values_ok for c in part.cases)
        assert values == len(part.cases), part.output
        assert part.score < part.max_score
    assert re.search(r"communication observed: all-gather over Y .*allowed: only collective-permute",
                     result.part("allgather_matmul").output)
    assert re.search(r"the reduction over Y runs as 1 piece", result.part("allreduce_matmul").output)


def test_psum_then_slice_reduce_scatter(grade):
    """Does a psum-then-slice reduce-scatter lose reducescatter_matmul's communication points only?"""
    result = grade("psum_then_slice")
    s = scores(result)
    assert s["allgather_matmul"] == 2 and s["allreduce_matmul"] == 3
    assert s["reducescatter_matmul"] < 3 and s["transformer_block"] < 3
    assert re.search(r"all-reduce over Y .*allowed: only collective-permute",
                     result.part("reducescatter_matmul").output)


def test_more_bytes_than_needed(grade):
    """Does sending whole partial products around the ring fail on permute size?"""
    result = grade("full_accumulators")
    part = result.part("reducescatter_matmul")
    assert part.score < 3
    assert re.search(r"collective-permute of the wrong size: .*f32\[4,16\].*allowed: 16 elements", part.output)


def test_single_psum_is_not_split(grade):
    """Does one psum of the whole product lose allreduce_matmul's communication points?"""
    result = grade("one_psum")
    assert scores(result)["allreduce_matmul"] == pytest.approx(1.75)  # only the 8x1 mesh needs no split
    assert "Tile the output dimension" in result.part("allreduce_matmul").output


def test_hard_coded_ring_size(grade):
    """Does a ring written for nY = 4 fail on the other meshes?"""
    result = grade("hardcoded_ny")
    part = result.part("allgather_matmul")
    assert 0 < part.score < 1
    assert re.search(r"ppermute sources and destinations must be unique|values wrong", part.output)


def test_book_code_without_pcast(grade):
    """Does the book's code as printed (no pcast) fail with the carry-type error, not crash the grader?"""
    result = grade("no_pcast")
    part = result.part("allgather_matmul")
    assert part.score == 0
    assert "carry" in part.output


@pytest.mark.parametrize("name", ["gelu_erf", "relu_block"])
def test_block_with_the_wrong_nonlinearity_loses_its_values(grade, name):
    """Does a transformer block with erf-gelu or relu (where the contract says jax.nn.gelu, the
    tanh form) fail its values on every mesh (so score 0)? The hidden inputs keep gelu's input roughly
    in [-3, 3], where the forms differ, and tolerances are per element."""
    result = grade(name, only=["transformer_block"])
    part = result.part("transformer_block")
    assert all(not c.values_ok and c.rule_ok for c in part.cases), part.output
    assert part.score == 0  # the rule half needs right values too
    assert re.search(r"values wrong: \d+ of \d+ elements differ from the reference \(worst at index "
                     r"\(\d+, \d+\): got -?[\d.]+, expected -?[\d.]+, allowed error", part.output)


def test_hidden_block_inputs_keep_gelu_in_its_curved_region():
    """Are gelu's inputs (In @ Win) of order one on every hidden case: mostly inside [-3, 3]
    and spread over it, not pushed out where gelu is linear?"""
    from assignments.contracts import get_assignment
    from graders.hidden import hidden_cases, hidden_inputs

    problem3 = get_assignment("problem3")
    part = problem3.part("transformer_block")
    for case in hidden_cases(problem3)["transformer_block"]:
        x, w_in, _ = hidden_inputs(problem3, part, case, 7)
        h = x.astype(float) @ w_in
        assert np.mean(np.abs(h) <= 3) > 0.95 and np.mean(h < -0.5) > 0.1, case.label


def test_reduce_scatters_count_as_pieces_of_the_reduction():
    """Is a scatter-then-gather all-reduce told how many pieces its reduce-scatters make, never
    "0 piece(s)" while reduce-scatters are listed?"""
    def rs(n):
        return Collective("reduce-scatter", ("Y",), (ArrayShape("f32", (4, 8)),), (), 1, n)

    case = Case((2, 4), {"B": 8, "D": 16, "F": 32})
    rule = SplitReduction("Y", pieces=2)
    assert rule.violations(ProgramAnalysis((rs(4), rs(4)), (), None, 8), case) == []
    [message] = rule.violations(ProgramAnalysis((rs(4),), (), None, 8), case)
    assert message.startswith("the reduction over Y runs as 1 piece(s) (reduce-scatter over Y")


def test_every_corpus_file_is_tested():
    """Is every submission in tests/submissions/problem3 graded above?"""
    tested = {"unrolled_reverse_ring", "plain_jit", "psum_then_slice", "full_accumulators", "one_psum",
              "hardcoded_ny", "no_pcast", "gelu_erf", "relu_block"}
    assert {f[:-3] for f in os.listdir(CORPUS) if f.endswith(".py")} == tested
