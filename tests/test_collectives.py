"""collectives: the collectives built by hand from ppermute, graded on the lowered program (no
built-in collective, S006) and on the compiled one (permutes only, their count, size and reach).

Each corpus file (tests/submissions/collectives/) holds only the functions it tests, graded as an
overlay on the solution, once per session (`cached_grader`). Its expected points are written as
the cases it gets right: a case is worth points/7, half for its values and half for its rules,
and the rules' half needs right values too.
"""
from __future__ import annotations

import os
import re

import pytest
from grading import cached_grader

from assignments.contract import Case
from assignments.contracts import get_assignment
from assignments.rules import Program
from assignments.scaffold import unfilled
from assignments.style_rules import ByHand
from graders import Limits
from graders.hidden import hidden_cases

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "collectives")
COLLECTIVES = get_assignment("collectives")
POINTS = {p.name: p.points for p in COLLECTIVES.parts}
CASES = len(hidden_cases(COLLECTIVES)["ring_all_gather"])
LIMITS = Limits(cell_timeout=30, case_timeout=30, stall_timeout=60)


@pytest.fixture(scope="module")
def grade():
    return cached_grader("collectives", CORPUS, LIMITS)


def scores(result) -> dict[str, float]:
    return {p.name: p.score for p in result.parts}


def earned(function: str, values: int, rules: int) -> float:
    """The points of `function` for right values in `values` of its cases, and right values and
    rules in `rules` of them."""
    return round(POINTS[function] * (values + rules) / (2 * CASES), 2)


def rule_ids(part) -> set[str]:
    return {p.rule for c in part.cases for p in c.problems}


def test_hidden_cases_break_hard_coded_sizes():
    """Do the hidden cases cover rings of 1, 2, 3, 4 and 8 devices, with sizes that differ
    between meshes, D a multiple of nY and B of both nX and nY?"""
    cases = hidden_cases(COLLECTIVES)["ring_all_gather"]
    assert {c.mesh[1] for c in cases} == {1, 2, 3, 4, 8}
    assert len({(c.sizes["B"], c.sizes["D"]) for c in cases}) == len(cases)
    for c in cases:
        (nX, nY), B, D = c.mesh, c.sizes["B"], c.sizes["D"]
        assert D % nY == 0 and B % nX == 0 and B % nY == 0, c.label
    assert any((c.sizes["D"] // c.mesh[1]) % 2 for c in cases if c.mesh[1] >= 3)  # odd halves on a real ring


@pytest.mark.parametrize("function", list(POINTS))
def test_every_placeholder_is_filled_in(function, repo_root):
    """Is every placeholder the scaffold wrote (for the assignment and each function) replaced?
    (The scaffold's own test of each function, folded here: the solution's and the stub's
    points are the two tests below.)"""
    left = unfilled("collectives", function, repo_root)
    assert not left, "placeholders left to fill in:\n" + "\n".join(left)


def test_solution_full_marks_as_module_and_notebook(grade):
    """Do the solutions, as a module and as the solved notebook, get every point on every mesh?"""
    for path in ("solutions/collectives.py", "solutions/collectives/collectives.ipynb"):
        result = grade(os.path.join(REPO_ROOT, path))
        assert scores(result) == POINTS, result.to_text()


def test_stub_scores_zero(grade):
    """Does the released notebook, untouched, score 0 with 'not implemented'?"""
    result = grade(os.path.join(REPO_ROOT, "release", "collectives", "collectives.ipynb"))
    assert result.score == 0
    assert all("not implemented" in p.output for p in result.parts)


def test_other_directions_unrolled_loops_and_concatenation_earn_full_marks(grade):
    """Is every ring turned the other way, unrolled in Python, its blocks put in order by
    concatenate and roll, the bidirectional halves split along the rows and the all-to-all's
    jumps taken backwards, graded as the solution is (the property, not one spelling)?"""
    result = grade("reverse_unrolled_rings")
    assert scores(result) == POINTS, result.to_text()


UNUSUAL_BUT_RIGHT = {
    "honest_fori_unroll_and_pshuffle": "fori_loop with unroll (whole, and by 2 with a remainder), a loop "
                                       "counted from 0, the all-to-all by jax.lax.pshuffle",
    "axis_size_by_psum_of_one": "the ring's size as jax.lax.psum(1, 'Y'), which JAX folds at trace time: no "
                                "collective in the lowered program",
    "ring_over_both_axes": "the ring as a ppermute over ('X', 'Y') whose pairs move along Y only",
    "ring_in_while_loop": "the rings in jax.lax.while_loop (counting to a Python int) and jax.lax.scan, whose "
                          "trip counts XLA finds",
}
"""Red team, honest side: correct designs spelled in ways the contract's authors did not write."""


@pytest.mark.parametrize("name", sorted(UNUSUAL_BUT_RIGHT))
def test_unusual_but_right_designs_earn_full_marks(grade, name):
    """Does each correct design in an unusual spelling get every point?"""
    result = grade(name)
    assert scores(result) == POINTS, (UNUSUAL_BUT_RIGHT[name], result.to_text())


# name: ({function: (cases with right values, cases with right values and rules)}, rule ids, message)
MISTAKES = {
    "builtins": (
        # (JAX traces an all_to_all over one device to nothing: on 8x1 the 2x4 mesh's verdict is carried, P002)
        {f: (CASES, 0) for f in POINTS}, {"S006", "C003", "C005", "P002", "R001"},
        r"ring_reduce_scatter must build its collective from jax.lax.ppermute alone, but its program calls "
        r"jax.lax.psum_scatter"),
    "psum_where_one_device": (
        {"ring_all_reduce": (CASES, CASES - 1)}, {"S006"},
        r"\[mesh 8x1, B=16, D=5\] S006 ring_all_reduce must build its collective from jax.lax.ppermute alone, but "
        r"its program calls jax.lax.psum .*a psum over an axis of one device compiles to nothing, and still counts"),
    "hardcoded_ny": (
        {"ring_all_gather": (2, 2)}, {"E002", "V002", "C005", "R002"},
        r"ppermute sources and destinations must be unique"),
    "whole_row_each_step": (
        {"ring_all_gather": (CASES, 1)}, {"C005"},
        r"collective-permute of the wrong size: collective-permute over Y of f32\[4,16\] .*allowed: 16 elements per "
        r"device each"),
    "reduce_scatter_direct_sends": (
        {"ring_reduce_scatter": (CASES, 4)}, {"R002"},
        r"collective-permutes over Y that jump \+2 devices: .*allowed: steps to a neighbour only"),
    "all_reduce_by_gathering_partials": (
        {"ring_all_reduce": (CASES, 1)}, {"C005"},
        r"collective-permute over Y runs 3 time\(s\); allowed: exactly 6"),
    "all_to_all_by_ring_gather": (
        {"direct_all_to_all": (CASES, 1)}, {"C005"},
        r"collective-permute of the wrong size: collective-permute over Y of f32\[2,16\] .*allowed: 8 elements"),
    "all_to_all_by_all_gather": (
        {"direct_all_to_all": (CASES, 0)}, {"S006", "C003", "C005"},
        r"direct_all_to_all must build its collective from jax.lax.ppermute alone, but its program calls "
        r"jax.lax.all_gather"),
    "bidirectional_full_blocks": (
        {"bidirectional_all_gather": (CASES, 1)}, {"R003", "C006", "C005"},
        r"allowed: 8 elements each, half of a \[4, 4\] block.*sends 384 bytes per device; allowed: at most 192"),
    "bidirectional_halves_one_way": (
        {"bidirectional_all_gather": (CASES, 3)}, {"R001"},
        r"collective-permutes over Y go \+1 only; allowed: both ring directions"),
    "plain_jit": (
        {"ring_all_gather": (CASES, 0)}, {"S002", "P002", "C003", "C005"},
        r"ring_all_gather must be written with jax.shard_map, but the program has none"),
    "ring_walks_the_other_way": (
        {"ring_all_gather": (3, 3)}, {"V005", "H002"},
        r"values wrong: .*The program's collective-permutes over Y go -1 \(device j sends to j-1\)"),
    # red team: a psum where the compiled program's rules might not look, or no collective at all
    "psum_inside_inner_jit": (
        {"ring_all_reduce": (CASES, 0)}, {"S006", "C003", "C005"},
        r"ring_all_reduce must build its collective from jax.lax.ppermute alone, but its program calls "
        r"jax.lax.psum"),
    "sum_by_host_callback": (
        {"ring_all_reduce": (0, 0)}, {"E002"},
        r"host callbacks \(jax.pure_callback, io_callback, jax.debug.print\) cannot be exported"),
    # red team, second round (each file graded once): a built-in collective where a reader of the
    # compiled program might not look; the gather left to jax.jit around a shard_map that sends
    # nothing; two float32 blocks packed into one complex64 block (a block's elements, twice its
    # bytes); blocks sent as bfloat16; the bidirectional ring one way on odd rings, or with its
    # odd halves padded to one shape
    "builtins_in_wrappers": (
        {f: (CASES, 0) for f in ("ring_all_gather", "ring_reduce_scatter", "ring_all_reduce", "direct_all_to_all",
                                 "bidirectional_all_gather")},
        {"S006", "C003", "C005", "P002", "R001"},
        r"\[all 7 cases\] S006 ring_all_gather must build its collective from jax.lax.ppermute alone, but its program "
        r"calls jax.lax.all_gather.*S006 ring_reduce_scatter must build .* calls jax.lax.psum_scatter.*"
        r"S006 ring_all_reduce must build .* calls jax.lax.psum .*S006 direct_all_to_all must build .* calls "
        r"jax.lax.all_to_all.*S006 bidirectional_all_gather must build .* calls jax.lax.all_gather"),
    "ring_of_sharded_rolls": (
        # jnp.roll of the sharded array in jax.jit: XLA compiles the ring's very permutes, but XLA
        # built them, not the student (S005, carried to every mesh by P002)
        {"ring_all_gather": (CASES, 0)}, {"S005", "P002"},
        r"S005 ring_all_gather must communicate with jax.lax.ppermute inside its shard_map, but the program "
        r"calls none"),
    "gather_by_take_outside_shard_map": (
        {"ring_all_gather": (CASES, 0)}, {"S005", "P002", "C003", "C005"},
        r"\[mesh 2x4, B=8, D=16\] S005 ring_all_gather must communicate with jax.lax.ppermute inside its "
        r"shard_map, but the program calls none.* C003 communication observed: [a-z-]+ over Y of .*allowed: only "
        r"collective-permute"),
    "raw_shares_packed_in_complex": (
        {"ring_reduce_scatter": (CASES, CASES - 1), "direct_all_to_all": (CASES, CASES - 1)}, {"C005"},
        r"\[mesh 1x3, B=6, D=9\] C005 collective-permute of the wrong size: collective-permute over Y of c64\[6,3\] "
        r".*allowed: 18 elements per device each \(a collective of a type wider than float32 counts by its bytes: "
        r"c64\[6,3\] is as large as 36 float32 values\)"),
    "bfloat16_blocks": (
        {"ring_all_gather": (1, 1)}, {"V005"},
        r"V005 values wrong: .*by a little \(more than float32 rounding allows: a bfloat16 step"),
    "bidirectional_one_way_on_odd_rings": (
        {"bidirectional_all_gather": (CASES, CASES - 1)}, {"C005", "R001", "R003"},
        r"\[mesh 1x3, B=6, D=9\] C005 collective-permute over Y runs 2 time\(s\); allowed: exactly 4.*"
        r"R001 collective-permutes over Y go \+1 only.*R003 collective-permute of the wrong size"),
    "bidirectional_padded_halves": (
        {"bidirectional_all_gather": (CASES, 2)}, {"C006"},
        r"\[mesh 4x2, B=12, D=10\] C006 sends 72 bytes per device; allowed: at most 60 \(the one-way ring's"),
}


VALUES_ONLY = {"bfloat16_blocks"}
"""Mistakes whose subject is what the hidden data reaches (values), the same on any JAX: run on
the newest stack only (marker `arithmetic`)."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.arithmetic) if n in VALUES_ONLY else n
                                  for n in sorted(MISTAKES)])
def test_each_mistake_loses_its_points_with_its_message(grade, name):
    """Does each corpus file earn exactly the points of the cases it gets right (the functions it
    does not hold keep the solution's), with the rules named by id and the message the student
    reads?"""
    right, ids, message = MISTAKES[name]
    result = grade(name)
    expected = {f: earned(f, *right[f]) if f in right else POINTS[f] for f in POINTS}
    assert {f: round(s, 2) for f, s in scores(result).items()} == expected, result.to_text()
    wrong = [result.part(f) for f in right]
    assert set().union(*map(rule_ids, wrong)) == ids, [rule_ids(p) for p in wrong]
    assert re.search(message, "\n".join(p.output for p in wrong), re.S), "\n".join(p.output for p in wrong)


def test_the_rule_reads_a_psum_the_compiler_drops():
    """Does S006 find a psum over a one-device axis (which XLA removes, so the compiled program
    shows no collective at all) in the lowered program, and pass a program of permutes alone?"""
    import jax
    from jax.sharding import PartitionSpec as P

    from assignments import make_mesh, setup_devices
    from assignments.hlo import analyze
    from assignments.lowered import LoweredProgram

    setup_devices(8)
    mesh = make_mesh((8, 1))
    part = COLLECTIVES.part("ring_all_reduce")
    case = Case((8, 1), {"B": 16, "D": 5})
    x = jax.ShapeDtypeStruct((1, 16, 5), jax.numpy.float32, sharding=jax.NamedSharding(mesh, P('Y', 'X', None)))

    def program(body):
        lowered = jax.jit(lambda a: jax.shard_map(body, mesh=mesh, in_specs=P('Y', 'X', None), out_specs=P('X', None),
                                                  check_vma=False)(a)).lower(x)
        return lowered, Program(part, None, LoweredProgram(lowered.as_text()))

    lowered, summed = program(lambda a: jax.lax.psum(a[0], 'Y'))
    assert analyze(lowered.compile(), mesh).collectives == ()  # nothing left to see in the compiled program
    [message] = ByHand().problems(summed, case)
    assert "calls jax.lax.psum" in message
    _, permuted = program(lambda a: jax.lax.ppermute(a[0], 'Y', [(0, 0)]))
    assert ByHand().problems(permuted, case) == []
