"""problem4: bidirectional collective matmuls, judged on ring directions, message sizes and bytes."""
from __future__ import annotations

import os
import re

import pytest
from grading import cached_grader, load_module

from assignments.contract import Case
from assignments.contracts import get_assignment
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis
from assignments.rules import HalfBlocks
from graders import Limits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem4")
POINTS = {p.name: p.points for p in get_assignment("problem4").parts}
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


@pytest.mark.arithmetic
def test_full_size_chunks_both_ways(grade):
    """Does sending whole blocks both ways fail on message size and total bytes?"""
    part = grade("full_chunks_both_ways").part("reducescatter_matmul_bidirectional")
    assert all(c.values_ok for c in part.cases)
    cases = len(part.cases)
    # only the 8x1 mesh sends nothing
    assert part.score == pytest.approx(POINTS["reducescatter_matmul_bidirectional"] * (1 + 1 / cases) / 2, abs=0.01)
    assert re.search(r"collective-permute of the wrong size", part.output)
    assert re.search(r"allowed: at most \d+ \(the one-way version's bytes", part.output)


@pytest.mark.arithmetic
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
    # A whole [4, 4] block packed two floats to a c64 element has half the elements, all the bytes.
    packed = Collective("collective-permute", ("Y",), (ArrayShape("c64", (16,)),), (), 1, 4, (1,))
    [message] = even.violations(ProgramAnalysis((packed,), (), None, 8), case)
    assert message.endswith("(a collective of a type wider than float32 counts by its bytes: c64[16] is as "
                            "large as 32 float32 values)")


def test_uneven_split_both_ways(grade):
    """Does an all-gather ring sending one column one way and the rest the other keep its values
    and lose the rule half wherever a block has more than two columns, naming the sizes?"""
    part = grade("bidir_uneven_split", only=["allgather_matmul_bidirectional"]).part(
        "allgather_matmul_bidirectional")
    assert all(c.values_ok for c in part.cases), part.output
    for c in part.cases:  # one column against the rest is a fair split of a block 2 or 3 columns wide
        s = c.case.all_sizes
        assert c.rule_ok == (s["nY"] == 1 or s["D"] // s["nY"] <= 3), (c.case.label, c.messages)
    assert part.score < part.max_score
    assert re.search(r"collective-permute of the wrong size: collective-permute over Y of f32\[\d+,1\]",
                     part.output)


def odd_block(case: Case, width: str = "D") -> bool:
    s = case.all_sizes
    return s["nY"] > 1 and (s[width] // s["nY"]) % 2 == 1


def test_hidden_cases_cross_the_odd_block_boundary():
    """Do the hidden cases include odd blocks (D/nY and F/nY odd) on a ring of 4 and an odd ring,
    and does the visible check's first mesh have them too?"""
    from assignments.contracts import get_assignment
    from graders.hidden import hidden_cases

    problem4 = get_assignment("problem4")
    odd = {c.mesh for c in hidden_cases(problem4)["reducescatter_matmul_bidirectional"] if odd_block(c)}
    assert {(2, 4), (1, 3)} <= odd
    assert all(odd_block(p.visible_case) and odd_block(p.visible_case, "F") for p in problem4.parts)


def test_one_way_gather_phase_fails_naming_the_phase_and_bytes(grade):
    """Does an all-reduce whose reduce-scatter goes both ways but whose all-gather sends both halves
    left keep its values and fail exactly on rings of 3 or more, naming the all-gather phase and
    the bytes each way?"""
    function = "allreduce_matmul_bidirectional"
    part = grade("gather_phase_one_way", only=[function]).part(function)
    for c in part.cases:
        assert c.values_ok, (c.case.label, c.messages)
        assert c.rule_ok == (c.case.mesh[1] < 3), (c.case.label, c.messages)
        for problem in c.messages:
            m = re.fullmatch(r"ring phase 2 of 2 \(a loop body run (\d+) times\): (\d+) bytes per device go -1 "
                             r"and 0 go \+1; allowed: the same bytes each way at every step .*", problem)
            assert m and int(m.group(1)) == c.case.mesh[1] - 1, problem
            s = c.case.all_sizes
            assert int(m.group(2)) == s["B"] // s["nX"] * (s["F"] // s["nY"]) * 4  # both halves: one block


def test_each_phase_one_way_fails_though_the_program_is_balanced(grade):
    """Does a reduce-scatter all left and an all-gather all right (as many bytes each way in all)
    fail both phases on rings of 3 or more?"""
    function = "allreduce_matmul_bidirectional"
    part = grade("phases_one_way_each", only=[function]).part(function)
    for c in part.cases:
        assert c.values_ok, (c.case.label, c.messages)
        if c.case.mesh[1] >= 3:
            assert [p[:17] for p in c.messages] == ["ring phase 1 of 2", "ring phase 2 of 2"], c.messages
            assert "go -1 and 0 go +1" in c.messages[0] and "0 bytes per device go -1" in c.messages[1]
        else:
            assert c.rule_ok


def test_unrolled_rings_written_one_after_the_other_earn_full_marks(grade):
    """Are right rings written as Python loops, the second after the first, the first half sent
    right and the wider half first, graded as the solution is (the steps follow the data, not the
    order of the source)?"""
    assert {p.name: p.score for p in grade("unrolled_both_ways").parts} == POINTS


@pytest.mark.parametrize("part_name,width", [("reducescatter_matmul_bidirectional", "D"),
                                             ("allgather_matmul_bidirectional", "D"),
                                             ("allreduce_matmul_bidirectional", "F")])
@pytest.mark.arithmetic
def test_padding_odd_halves_fails_exactly_on_odd_blocks(grade, part_name, width):
    """Does padding both halves of an odd block to the wider one keep right values everywhere and
    lose the byte rule exactly where the block (D/nY; F/nY for the all-reduce) is odd, saying why?"""
    part = grade("pad_odd_halves", only=[part_name]).part(part_name)
    for c in part.cases:
        assert c.values_ok, (c.case.label, c.messages)
        assert c.rule_ok == (not odd_block(c.case, width)), (c.case.label, c.messages)
    assert re.search(r"sends \d+ bytes per device; allowed: at most \d+ \(the one-way version's bytes: the "
                     r"halves of an odd block are one column apart", part.output)


@pytest.mark.parametrize("part_name", ["reducescatter_matmul_bidirectional", "allgather_matmul_bidirectional"])
def test_even_only_halves_fail_exactly_on_odd_blocks(grade, part_name):
    """Does a ring written for even blocks (both halves D/nY // 2) pass every even case and fail
    every odd one on its values?"""
    part = grade("even_halves_only", only=[part_name]).part(part_name)
    for c in part.cases:
        assert c.passed == (not odd_block(c.case)), (c.case.label, c.messages)
        assert c.values_ok == (not odd_block(c.case)), (c.case.label, c.messages)


def test_balance_fails_closed_without_stages():
    """A program too large to keep its stages (over steps.MAX_EVENTS events: a long loop
    unrolled, or thousands of padding matmuls) cannot show that each ring step is balanced:
    is it refused, however balanced its totals, rather than judged on totals?"""
    from assignments.rules import BalancedDirections

    def permute(shift, count):
        return Collective("collective-permute", ("Y",), (ArrayShape("f32", (4, 2)),), (), count, 4, (shift,))

    case = Case((2, 4), {"B": 8, "F": 16})
    rule = BalancedDirections("Y", lambda s: 4, lambda s: 4)
    [message] = rule.violations(ProgramAnalysis((permute(1, 3), permute(3, 3)), (), None, 8), case)
    assert "too many collectives and matmuls (over 4,000)" in message and "fori_loop" in message
    assert rule.violations(ProgramAnalysis((permute(1, 3),), (), None, 8), case) == []  # one way: BothDirections'


SWAPS = """HloModule m

ENTRY %main (a: f32[4,2], b: f32[4,2]) -> (f32[4,2], f32[4,2]) {
  %a = f32[4,2]{1,0} parameter(0)
  %b = f32[4,2]{1,0} parameter(1)
  %p = f32[4,2]{1,0} collective-permute(%a), channel_id=1, source_target_pairs=FIRST
  %q = f32[4,2]{1,0} collective-permute(%b), channel_id=2, source_target_pairs=SECOND
  ROOT %t = (f32[4,2]{1,0}, f32[4,2]{1,0}) tuple(%p, %q)
}
"""


def test_balance_is_each_devices_not_the_total():
    """On a ring of 4, two half-block permutes in one step in which neighbours swap blocks (device
    0 sends both halves +1, device 1 both -1, ...) balance the total but leave one direction of
    every link idle: refused. Two rings, one each way, pass."""
    from assignments.hlo import analyze_text
    from assignments.rules import BalancedDirections

    rule = BalancedDirections("Y", lambda s: 4, lambda s: 4)
    case = Case((1, 4), {})
    swap = "{{0,1},{1,0},{2,3},{3,2}}"
    [message] = rule.violations(analyze_text(SWAPS.replace("FIRST", swap).replace("SECOND", swap), (1, 4),
                                             ("X", "Y")), case)
    assert message.startswith("ring phase 1 of 1 (straight-line code): 0 bytes per device go -1 and 64 go +1")
    rings = SWAPS.replace("FIRST", "{{0,1},{1,2},{2,3},{3,0}}").replace("SECOND", "{{1,0},{2,1},{3,2},{0,3}}")
    assert rule.violations(analyze_text(rings, (1, 4), ("X", "Y")), case) == []


def test_permutes_that_jump_devices_are_no_ring_steps(grade):
    """Half of each block on a -1 ring and the other half by jumps that still reach every
    device (the permute count of a ring each way): values right, the rule lost exactly on the
    rings where a jump is not a neighbour step (4, 5 and 8 devices), naming the jumps."""
    result = grade("ring_jumps", only=["reducescatter_matmul_bidirectional", "allgather_matmul_bidirectional"])
    for part in result.parts:
        for c in part.cases:
            assert c.values_ok, c.messages
            assert c.rule_ok == (c.case.mesh[1] <= 3), (part.name, c.case.label, c.messages)
        assert re.search(r"collective-permutes over Y that jump \+\d", part.output), part.output


def test_permutes_in_a_branch_that_never_runs_are_no_direction(grade):
    """A one-way ring with the other direction's permutes in a lax.cond branch no device takes:
    values right, and the rule lost on every ring of 3 or more, as the one-way ring it is."""
    part = grade("dead_branch_other_way", only=["reducescatter_matmul_bidirectional"]).part(
        "reducescatter_matmul_bidirectional")
    for c in part.cases:
        assert c.values_ok, c.messages
        assert c.rule_ok == (c.case.mesh[1] < 3), (c.case.label, c.messages)
    assert "collective-permutes over Y go -1 only" in part.output


def test_a_cond_that_chooses_the_direction_of_each_pass_is_one_way(grade):
    """A ring whose every pass sends both halves one way, a lax.cond choosing +1 or -1 by the
    pass: balanced in all, and one step holds both branches' permutes, but they never run
    together. The rule lost on every ring of 3 or more; the same parts with both halves of a
    step inside one branch (a step a cond skips) keep full marks."""
    part = grade("direction_chosen_by_cond", only=["reducescatter_matmul_bidirectional"]).part(
        "reducescatter_matmul_bidirectional")
    for c in part.cases:
        assert c.values_ok, c.messages
        assert c.rule_ok == (c.case.mesh[1] < 3), (c.case.label, c.messages)
    assert re.search(r"go -1 and 0 go \+1|go -1 and [\d,]+ go \+1", part.output), part.output
    right = grade("steps_inside_conds")
    assert {p.name: p.score for p in right.parts} == POINTS, right.to_text()


def test_rings_wrapped_whole_in_a_cond_are_read_step_by_step(grade):
    """One-way rings written unrolled inside a lax.cond that always runs them (all the
    reduce-scatter -1 and all the all-gather +1; one ring -1 and only then the other +1):
    balanced in all, and every permute inside the one branch. The steps inside the branch are
    the steps they would be outside it, so each part keeps its values and loses the rule on
    every ring of 3 or more, naming the first step, its bytes one way only, and the rest."""
    result = grade("rings_inside_one_cond")
    for part in result.parts:
        for c in part.cases:
            assert c.values_ok, (part.name, c.case.label, c.messages)
            assert c.rule_ok == (c.case.mesh[1] < 3), (part.name, c.case.label, c.messages)
            if c.case.mesh[1] < 3:
                continue
            steps = 2 * (c.case.mesh[1] - 1)  # a ring -1, then one +1: every step one-way
            assert any(re.fullmatch(rf"ring phase 1 of 1 \(straight-line code\), step 1 of its {steps} \(and "
                                    rf"{steps - 1} more of its steps\): [1-9][\d,]* bytes per device go -1 and 0 "
                                    rf"go \+1; allowed: the same bytes each way at every step .*", p)
                       for p in c.messages), (part.name, c.case.label, c.messages)


def test_visible_checks_run_an_odd_block():
    """Does the visible check pass the solution on its odd-block mesh and the second mesh, and
    fail the padding design there, as the graders do?"""

    from assignments import check
    import solutions.problem4 as solution

    pad = load_module(os.path.join(CORPUS, "pad_odd_halves.py"))
    for name in POINTS:
        assert check(getattr(solution, name), show=False).passed, name
    failed = check(pad.reducescatter_matmul_bidirectional, show=False, raises=False)
    assert not failed.passed and any("one-way version's bytes" in p for p in failed.messages)


def test_a_module_of_the_answer_cells_grades_as_the_notebook(grade, tmp_path):
    """Does a .py module holding only the set-up cell and the three answer cells (no other cell
    of the notebook) grade exactly as the solved notebook: no helper the answers need lives in a
    cell the student did not write?"""
    from graders.build import solved_notebook

    nb = solved_notebook(os.path.join(REPO_ROOT, "source", "problem4", "problem4.ipynb"))
    wanted = {"setup"} | {f"{name}_solution" for name in POINTS}
    kept = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") in wanted]
    assert len(kept) == 4
    path = tmp_path / "answers.py"
    path.write_text("\n\n\n".join(kept) + "\n")
    module = grade(str(path))
    notebook = grade(os.path.join(REPO_ROOT, "solutions", "problem4", "problem4.ipynb"))
    assert {p.name: p.score for p in module.parts} == {p.name: p.score for p in notebook.parts} == POINTS


@pytest.mark.parametrize("name, function", [("gather_then_matmul", "allgather_matmul_bidirectional"),
                                            ("whole_product_before_the_rings", "reducescatter_matmul_bidirectional"),
                                            ("allreduce_whole_product_before_the_rings", "allreduce_matmul_bidirectional")])
def test_a_matmul_of_every_block_at_once_leaves_nothing_to_overlap(grade, name, function):
    """Rings both ways that only gather A (one matmul of the gathered operand after them), and
    rings both ways passing slices of the whole partial product made before them: halves and
    directions right, values right, the rule lost on every mesh with a ring (nY >= 2)."""
    part = grade(name, only=[function]).part(function)
    for c in part.cases:
        ring = c.case.mesh[1] >= 2
        assert c.values_ok and c.rule_ok == (not ring), (c.case.label, c.messages)
        if ring:
            assert re.search(r"one matmul in the program does [\d,]+ FLOPs per device at once", "; ".join(c.messages))
    assert part.score < part.max_score


@pytest.mark.parametrize("name, function, lost_on", [
    ("blocks_outside_the_rings", "reducescatter_matmul_bidirectional", {3, 4, 5, 8}),
    ("blocks_outside_the_rings", "allgather_matmul_bidirectional", {3, 4, 5, 8}),
    # unrolled, on an odd ring the products left outside stay within the allowance of two blocks
    ("unrolled_rings_then_block_loop", "allgather_matmul_bidirectional", {4, 8}),
    # the same products written as a multiply and a sum (no dot)
    ("blocks_as_multiply_and_sum_outside_the_rings", "allreduce_matmul_bidirectional", {3, 4, 5, 8}),
    ("blocks_as_multiply_and_sum_outside_the_rings", "reducescatter_matmul_bidirectional", {3, 4, 5, 8}),
    ("blocks_as_multiply_and_sum_outside_the_rings", "allgather_matmul_bidirectional", {3, 4, 5, 8})])
def test_block_products_in_a_loop_of_their_own_overlap_nothing(grade, name, function, lost_on):
    """Rings both ways that carry data only: every half-block's product (a dot, or a multiply and a
    sum) made in a loop of its own before the rings start, or after they end. Each product at
    most one block's size, halves and
    directions right, values right; the rule lost on every mesh with nY >= 3 (unrolled, on the
    even ones), naming the matmuls outside the ring."""
    part = grade(name, only=[function]).part(function)
    for c in part.cases:
        assert c.values_ok and (c.rule_ok or c.case.mesh[1] > 1), (c.case.label, c.messages)
        if c.case.mesh[1] in lost_on:
            assert not c.rule_ok, c.case.label
            assert "FLOPs of matmuls per device outside the ring" in "; ".join(c.messages), c.messages
    assert part.score < part.max_score


@pytest.mark.parametrize("function", ["reducescatter_matmul_bidirectional", "allgather_matmul_bidirectional"])
def test_block_products_in_a_loop_of_unknown_length_are_not_counted_once(grade, function):
    """Rings both ways that carry data only, every block's dot in a while_loop whose bound the
    compiler cannot know (always nY): counted once, its dots looked like one block's work. Values
    right; the rule lost on every mesh with a ring (nY >= 2), saying the loop's work cannot be
    counted and to use static bounds."""
    part = grade("blocks_in_a_loop_of_unknown_length", only=[function]).part(function)
    for c in part.cases:
        assert c.values_ok and c.rule_ok == (c.case.mesh[1] < 2), (c.case.label, c.messages)
        if c.case.mesh[1] >= 2:
            assert any(p.startswith("the program multiplies inside a loop whose trip count is not known at compile "
                                    "time") for p in c.messages), c.messages
    assert part.score < part.max_score


def test_whole_products_made_by_rank1_updates_apart_from_the_rings_overlap_nothing(grade):
    """Rings both ways that only move data, every product made apart from them by rank-1
    updates (a fori_loop of multiplies of two broadcasts; XLA unrolls the short ones into
    straight-line code that runs no collective): values right everywhere; the rule lost on both
    2x4 cases of every function, and on 1x8 where the unrolled products sit before the rings or
    after them, naming the matmuls outside the ring."""
    functions = ["reducescatter_matmul_bidirectional", "allreduce_matmul_bidirectional",
                 "allgather_matmul_bidirectional"]
    result = grade("whole_products_by_rank1_updates_outside_the_rings", only=functions)
    for function in functions:
        part = result.part(function)
        lost_on = [(2, 4)] + ([(1, 8)] if function != "allreduce_matmul_bidirectional" else [])
        for c in part.cases:
            assert c.values_ok and (c.rule_ok or c.case.mesh[1] >= 3), (function, c.case.label, c.messages)
            if tuple(c.case.mesh) in lost_on:
                assert not c.rule_ok, (function, c.case.label)
                assert "FLOPs of matmuls per device outside the ring" in "; ".join(c.messages), c.messages
        assert part.score < part.max_score


def test_every_corpus_file_is_tested():
    """Is every submission in tests/submissions/problem4 graded above?"""
    assert {f[:-3] for f in os.listdir(CORPUS) if f.endswith(".py")} == {
        "one_way", "full_chunks_both_ways", "hardcoded_ny4", "bidir_uneven_split", "gather_phase_one_way",
        "phases_one_way_each", "unrolled_both_ways", "pad_odd_halves", "even_halves_only", "ring_jumps",
        "dead_branch_other_way", "direction_chosen_by_cond", "steps_inside_conds", "rings_inside_one_cond",
        "gather_then_matmul", "whole_product_before_the_rings", "blocks_outside_the_rings",
        "unrolled_rings_then_block_loop", "allreduce_whole_product_before_the_rings",
        "blocks_as_multiply_and_sum_outside_the_rings", "blocks_in_a_loop_of_unknown_length",
        "whole_products_by_rank1_updates_outside_the_rings"}
