"""problem4: bidirectional collective matmuls, judged on ring directions, message sizes and bytes."""
from __future__ import annotations

import os
import re

import pytest
from grading import cached_grader

from assignments.contract import Case
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis
from assignments.rules import HalfBlocks
from graders import Limits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem4")
POINTS = {"allreduce_matmul_bidirectional": 5, "reducescatter_matmul_bidirectional": 4,
          "allgather_matmul_bidirectional": 2}
LIMITS = Limits(cell_timeout=30, case_timeout=30, stall_timeout=60)


@pytest.fixture(scope="module")
def grade():
    return cached_grader("problem4", CORPUS, LIMITS)


def test_directions_are_read_from_source_target_pairs():
    """Does the analysis call a step to the next device +1 and to the previous -1, on odd and even rings?"""
    def permute(shifts, n):
        return Collective("collective-permute", ("Y",), (), (), 1, n, shifts)

    assert permute((1,), 4).directions == (1,)
    assert permute((3,), 4).directions == (-1,)
    assert permute((1, 4), 5).directions == (-1, 1)
    assert permute((1,), 2).directions == (1,)


def test_solutions_full_marks_including_odd_rings(grade):
    """Do the solutions get every point on every mesh, rings of 3 and 5 included?"""
    for path in ("solutions/problem4.py", "solutions/problem4/problem4.ipynb"):
        result = grade(os.path.join(REPO_ROOT, path))
        assert {p.name: p.score for p in result.parts} == POINTS, result.to_text()
        labels = {c.case.label.split(",")[0] for p in result.parts for c in p.cases}
        assert {"mesh 1x3", "mesh 1x5"} <= labels


def test_stub_scores_zero(grade):
    """Does the released notebook, untouched, score 0?"""
    result = grade(os.path.join(REPO_ROOT, "release", "problem4", "problem4.ipynb"))
    assert result.score == 0


def test_one_way_submitted_as_bidirectional(grade):
    """Do problem3's one-way matmuls, renamed, keep their values and lose communication, named by direction?"""
    result = grade("one_way")
    for part in result.parts:
        assert all(c.values_ok for c in part.cases), part.output
        assert part.score < part.max_score
    assert re.search(r"collective-permutes over Y go -1 only; allowed: both ring directions",
                     result.part("reducescatter_matmul_bidirectional").output)
    assert re.search(r"all-reduce over Y .*allowed: only collective-permute",
                     result.part("allreduce_matmul_bidirectional").output)


def test_full_size_chunks_both_ways(grade):
    """Does sending whole blocks both ways fail on message size and total bytes?"""
    part = grade("full_chunks_both_ways").part("reducescatter_matmul_bidirectional")
    assert all(c.values_ok for c in part.cases)
    assert part.score == pytest.approx(4 * (0.5 + 0.5 / 6), abs=0.01)  # only the 8x1 mesh sends nothing
    assert re.search(r"collective-permute of the wrong size", part.output)
    assert re.search(r"allowed: at most \d+ \(the one-way version's bytes\)", part.output)


def test_hard_coded_ring_of_four(grade):
    """Does a ring written for nY = 4 lose every mesh but the 2x4 one (and the ringless 8x1)?"""
    result = grade("hardcoded_ny4")
    for part in result.parts:
        assert part.score <= part.max_score * 2 / 6 + 1e-9, part.output


def test_half_blocks_allow_one_row_or_column_of_slack_only_when_odd():
    """Does the half-block rule ask for exactly half of an even block, accept a split within one
    row or column of half when a dimension is odd, and reject one column against the rest?"""
    def permute(rows, cols):
        return Collective("collective-permute", ("Y",), (ArrayShape("f32", (rows, cols)),), (), 1, 4, (1,))

    case = Case((2, 4), {})
    even = HalfBlocks("Y", lambda s: 4, lambda s: 4)
    assert even.violations(ProgramAnalysis((permute(4, 2), permute(2, 4)), (), None, 8), case) == []
    [message] = even.violations(ProgramAnalysis((permute(4, 1), permute(4, 3)), (), None, 8), case)
    assert re.search(r"collective-permute of the wrong size: .*f32\[4,1\].*f32\[4,3\].*; allowed: 8 "
                     r"elements each, half of a \[4, 4\] block", message)
    odd = HalfBlocks("Y", lambda s: 3, lambda s: 5)  # halves: 3x2 or 3x3, or 1x5 or 2x5
    assert odd.violations(ProgramAnalysis((permute(3, 2), permute(3, 3)), (), None, 8), case) == []
    assert odd.violations(ProgramAnalysis((permute(3, 1),), (), None, 8), case)


def test_uneven_split_both_ways(grade):
    """Does an all-gather ring sending one column one way and the rest the other keep its values
    and lose the rule half wherever a block has more than two columns, naming the sizes?"""
    part = grade("bidir_uneven_split", only=["allgather_matmul_bidirectional"]).part(
        "allgather_matmul_bidirectional")
    assert all(c.values_ok for c in part.cases), part.output
    for c in part.cases:
        s = c.case.all_sizes
        assert c.rule_ok == (s["nY"] == 1 or s["D"] // s["nY"] <= 2), (c.case.label, c.problems)
    assert part.score < part.max_score
    assert re.search(r"collective-permute of the wrong size: collective-permute over Y of f32\[\d+,1\]",
                     part.output)


def test_every_corpus_file_is_tested():
    """Is every submission in tests/submissions/problem4 graded above?"""
    assert {f[:-3] for f in os.listdir(CORPUS) if f.endswith(".py")} == {
        "one_way", "full_chunks_both_ways", "hardcoded_ny4", "bidir_uneven_split"}
