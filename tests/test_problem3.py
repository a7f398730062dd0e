"""problem3: collective matmuls graded on their compiled communication, across meshes."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from grading import cached_grader

from assignments.contract import Case
from assignments.contracts import get_assignment
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis
from assignments.rules import SplitReduction
from graders import Limits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem3")
POINTS = {p.name: p.points for p in get_assignment("problem3").parts}
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
    assert re.search(r"the reduction over Y runs in one piece: all-reduce over Y of f32\[4,32\]",
                     result.part("allreduce_matmul").output)


def test_psum_then_slice_reduce_scatter(grade):
    """Does a psum-then-slice reduce-scatter lose reducescatter_matmul's communication points only?"""
    result = grade("psum_then_slice")
    s = scores(result)
    assert s["allgather_matmul"] == POINTS["allgather_matmul"] and s["allreduce_matmul"] == POINTS["allreduce_matmul"]
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
    cases = len(result.part("allreduce_matmul").cases)
    # only 8x1 needs no split
    assert scores(result)["allreduce_matmul"] == pytest.approx(POINTS["allreduce_matmul"] * (1 + 1 / cases) / 2, abs=0.01)
    assert "Tile the output dimension" in result.part("allreduce_matmul").output


@pytest.mark.arithmetic
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


@pytest.mark.arithmetic
@pytest.mark.parametrize("name", ["gelu_erf", "relu_block"])
def test_block_with_the_wrong_nonlinearity_loses_its_values(grade, name):
    """Does a transformer block with erf-gelu or relu (where the contract says jax.nn.gelu, the
    tanh form) fail its values on every mesh (so score 0)? The hidden inputs keep gelu's input roughly
    in [-3, 3], where the forms differ, and tolerances are per element."""
    result = grade(name, only=["transformer_block"])
    part = result.part("transformer_block")
    assert all(not c.values_ok and c.rule_ok for c in part.cases), part.output
    assert part.score == 0  # the rule half needs right values too
    assert re.search(r"values wrong: (every|most|some) elements? of the result differs? from the reference, by a "
                     r"(little|lot)", part.output)
    if name == "gelu_erf":  # off by a little: no block in the wrong place, so no word on the ring
        assert "collective-permutes over Y go" not in part.output


def test_hidden_block_inputs_keep_gelu_in_its_curved_region():
    """Are gelu's inputs (In @ Win) of order one on every hidden case: mostly inside [-3, 3]
    and spread over it, not pushed out where gelu is linear?"""
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


def test_a_ring_beside_the_whole_reduction_is_no_split():
    """Is one reduction of the whole [B/nX, F] result refused even beside a permute of one
    element (an all-reduce, one packed into a wider type, or all-to-alls that scatter the whole
    result for each device to add up), while a ring with the remainder's psum beside it passes?"""
    def over_y(kind, dtype, dims):
        return Collective(kind, ("Y",), (ArrayShape(dtype, dims),), (), 1, 4)

    case = Case((2, 4), {"B": 8, "D": 16, "F": 32})   # the result: [4, 32] per device
    rule = SplitReduction("Y", pieces=2, whole=lambda s: s["B"] // s["nX"] * s["F"])
    scatter_by_all_to_all = Collective("all-to-all", ("Y",), (ArrayShape("f32", (1, 4, 8)),) * 4, (), 1, 4)
    for whole in (over_y("all-reduce", "f32", (4, 32)), over_y("all-reduce", "c64", (4, 16)), scatter_by_all_to_all):
        [message] = rule.violations(ProgramAnalysis((whole, over_y("collective-permute", "f32", (1, 1))),
                                                    (), None, 8), case)
        assert message.startswith(f"the reduction over Y runs in one piece: {whole.kind} over Y of {whole.shape}")
    ring_and_rest = (over_y("collective-permute", "f32", (4, 7)), over_y("all-reduce", "f32", (4, 4)))
    assert rule.violations(ProgramAnalysis(ring_and_rest, (), None, 8), case) == []


def test_permutes_over_x_beside_the_ring_are_refused():
    """The ring of nY-1 permutes over Y, plus permutes over X (data the result does not need,
    folded in times zero): is the extra communication refused, not left uncounted because it is
    over another axis?"""
    from assignments.contracts.problem3 import ring_of_permutes

    def permute(axis, dims, count):
        return Collective("collective-permute", (axis,), (ArrayShape("f32", dims),), (), count, 4, (1,))

    case = Case((2, 4), {"B": 8, "D": 16, "F": 32})   # a [4, 4] block per device
    rule = ring_of_permutes()
    ring = permute("Y", (4, 4), 3)
    assert rule.violations(ProgramAnalysis((ring,), (), None, 8), case) == []
    [message] = rule.violations(ProgramAnalysis((ring, permute("X", (16, 8), 1)), (), None, 8), case)
    assert message.startswith("communication observed: collective-permute over X of f32[16,8] (512 bytes) x1; "
                              "allowed: no collective-permute over X")


def test_permutes_that_jump_are_no_ring():
    """nY-1 permutes of a block each, every one sending the owner's block straight to the device
    s places on (s = 1, 2, 3: an all-gather spread over permutes): refused on a ring of 4 for the
    jumps of 2, while a ring of neighbour steps (+1, or -1 on the wrap) passes, and on a ring of
    3 a step of 2 is the -1 neighbour."""
    from assignments.contracts.problem3 import ring_of_permutes

    def permute(shift, n=4):
        return Collective("collective-permute", ("Y",), (ArrayShape("f32", (4, 4)),), (), 1, n, (shift,))

    case = Case((2, 4), {"B": 8, "D": 16, "F": 32})   # a [4, 4] block per device
    rule = ring_of_permutes()
    assert rule.violations(ProgramAnalysis((permute(1),) * 3, (), None, 8), case) == []
    assert rule.violations(ProgramAnalysis((permute(3),) * 3, (), None, 8), case) == []
    [message] = rule.violations(ProgramAnalysis((permute(1), permute(2), permute(3)), (), None, 8), case)
    assert message.startswith("collective-permutes over Y that jump +2 devices: collective-permute over Y of "
                              "f32[4,4] (64 bytes) x1; allowed: steps to a neighbour only (+1 or -1 along Y")
    three = Case((2, 3), {"B": 8, "D": 12, "F": 12})
    assert rule.violations(ProgramAnalysis((permute(1, 3), permute(2, 3)), (), None, 6), three) == []


def test_a_split_of_f_minus_one_and_one_is_no_split():
    """One matmul of the whole result, then psums of its first F-1 columns and of the last one
    (XLA combines them into one all-reduce of two operands): two pieces by count, but nothing
    left to overlap. Is a piece above 90% of the result refused, while halves, the uneven tiles
    of an odd F and fixed 8-column tiles of F=10 pass?"""
    def pieces(*cols):
        return Collective("all-reduce", ("Y",), tuple(ArrayShape("f32", (4, c)) for c in cols), (), 1, 4)

    case = Case((2, 4), {"B": 8, "D": 16, "F": 32})   # the result: [4, 32] per device
    rule = SplitReduction("Y", pieces=2, whole=lambda s: s["B"] // s["nX"] * s["F"])
    [message] = rule.violations(ProgramAnalysis((pieces(31, 1),), (), None, 8), case)
    assert message.startswith("the reduction over Y is split unevenly: one piece carries 124 of the result's "
                              "128 elements per device")
    for fine in (pieces(16, 16), pieces(8, 8, 8, 8), pieces(24, 8)):
        assert rule.violations(ProgramAnalysis((fine,), (), None, 8), case) == [], fine.shape
    odd = Case((2, 4), {"B": 8, "D": 16, "F": 5})
    assert rule.violations(ProgramAnalysis((pieces(3, 2),), (), None, 8), odd) == []
    ten = Case((2, 2), {"B": 8, "D": 8, "F": 10})
    assert rule.violations(ProgramAnalysis((pieces(8, 2),), (), None, 8), ten) == []


@pytest.mark.arithmetic
def test_padding_the_pieces_fails_exactly_where_f_is_not_a_multiple_of_four(grade):
    """Does a reduction always in 4 equal pieces, F padded up, keep its values and lose the byte
    rule exactly on the cases whose F is not a multiple of 4 (with a Y to reduce over), the
    boundary the +5% budget draws? The solution's uneven F passes there."""
    part = grade("padded_pieces", only=["allreduce_matmul"]).part("allreduce_matmul")
    crossed = {c.case.label for c in part.cases if c.case.sizes["F"] % 4 and c.case.mesh[1] > 1}
    assert crossed == {"mesh 2x2, B=6, D=6, F=10", "mesh 2x4, B=8, D=16, F=18"}
    for c in part.cases:
        assert c.values_ok and c.rule_ok == (c.case.label not in crossed), (c.case.label, c.messages)
    assert re.search(r"sends 480 bytes per device; allowed: at most 453 \(one ring all-reduce of the "
                     r"\[B/nX, F\] result, \+5%\)", part.output)
    solution = grade(os.path.join(REPO_ROOT, "solutions/problem3.py"), only=["allreduce_matmul"])
    assert {c.case.label for c in solution.part("allreduce_matmul").cases} >= crossed


def test_psum_over_the_wrong_axis_is_named(grade):
    """Does a tiled reduction whose psums add over X (check_vma off) say that nothing is reduced
    over Y and that X was used, never advising to tile what is already tiled?"""
    part = grade("wrong_psum_axis", only=["allreduce_matmul"]).part("allreduce_matmul")
    assert part.score == 0
    assert "Tile the output dimension" not in part.output
    for c in part.cases:
        if c.case.mesh[1] > 1 and c.case.mesh[0] > 1:
            assert any(p.startswith("nothing is reduced over Y: the program reduces over X instead (all-reduce "
                                    "over X") and "check the axis name your psum is given" in p
                       for p in c.messages), c.messages
        elif c.case.mesh[1] > 1:  # X has one device: the psum over X is no collective at all
            assert any(p.startswith("nothing is reduced over Y (observed: none)") for p in c.messages), c.messages


def test_psum_over_the_wrong_axis_with_checks_on_is_explained(grade):
    """With check_vma on, JAX refuses the out_specs; does the student read, after JAX's message,
    that the result still varies over Y because the psum never added over Y?"""
    part = grade("wrong_psum_axis_checked", only=["allreduce_matmul"]).part("allreduce_matmul")
    assert part.score == 0
    assert re.search(r"out_specs.*The kit's reading: the value returned still differs between the devices "
                     r"along Y.*check the axis your psum names", part.output, re.S)


def test_a_ring_walking_the_other_way_says_which_way_the_chunks_went(grade):
    """Does a ring sending +1 with the -1 schedule's chunk indices fail its values exactly on rings
    of 3 or more (on 2 the two directions meet), saying the chunks went +1 and what that brings?"""
    part = grade("ring_walks_the_other_way", only=["allgather_matmul"]).part("allgather_matmul")
    for c in part.cases:
        assert c.values_ok == (c.case.mesh[1] < 3) and c.rule_ok, (c.case.label, c.messages)
    assert re.search(r"values wrong: [^\n]*\. H002 The program's collective-permutes over Y go \+1 \(device j sends to j\+1\) x3: after s "
                     r"steps of \+1 a device holds what device idx - s started with", part.output)


def test_a_block_calling_an_unfinished_function_names_it(grade):
    """Is transformer_block, calling a reducescatter_matmul that still raises NotImplementedError,
    told to finish reducescatter_matmul (and reducescatter_matmul that it is not implemented)?"""
    result = grade("missing_callee")
    assert "transformer_block calls reducescatter_matmul, which still raises NotImplementedError" in \
        result.part("transformer_block").output
    assert "not implemented" in result.part("reducescatter_matmul").output
    assert scores(result)["allgather_matmul"] == POINTS["allgather_matmul"]


def reducescatter_matmul():
    """A stub, as a student's module has it (top level)."""
    raise NotImplementedError()


def transformer_block():
    """A stub whose own nested function raises."""
    def local():
        raise NotImplementedError()
    return local()


def test_not_implemented_names_the_function_that_raised():
    """Does the shared diagnosis name the graded function's own stub as unfinished, a nested
    function of it likewise, and a called function by name?"""
    from assignments.diagnosis import UNFINISHED, not_implemented_message

    for fn in (reducescatter_matmul, transformer_block):
        with pytest.raises(NotImplementedError) as e:
            fn()
        assert not_implemented_message(e.value, fn.__name__) == UNFINISHED
    with pytest.raises(NotImplementedError) as e:
        reducescatter_matmul()
    assert not_implemented_message(e.value, "transformer_block").startswith(
        "not implemented yet: transformer_block calls reducescatter_matmul")


def test_a_wrong_designs_estimate_differs_from_the_right_ones(mesh_2x4):
    """Does the estimate table tell a ring that multiplies beside each permute from one that sends
    the same permutes and matmuls but gathers every chunk first? (Same bytes, same FLOPs: only the
    order differs, and the estimated column must show it.)"""
    import functools

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from assignments.checks import compile_programs
    from assignments.costs import comparison_table, estimate, program_seconds
    from solutions.problem3 import allgather_matmul

    def gather_then_multiply(A, W, *, mesh):
        def local(a, w):
            n, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
            chunks = [a]
            for _ in range(n - 1):
                chunks.append(jax.lax.ppermute(chunks[-1], "Y", [(j, (j - 1) % n) for j in range(n)]))
            whole = jnp.roll(jnp.concatenate(chunks, axis=1), idx * a.shape[1], axis=1)
            return whole @ w
        return jax.shard_map(local, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(A, W)

    args = tuple(jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh_2x4, P(*spec)))
                 for shape, spec in (((1024, 2048), ("X", "Y")), ((2048, 8192), (None, "Y"))))
    runs = compile_programs({"ring": allgather_matmul, "wrong": gather_then_multiply}, args, {"mesh": mesh_2x4}, "test")
    ring, wrong = (estimate(runs[k], "TPU v5e") for k in ("ring", "wrong"))
    assert ring.comm_bytes == wrong.comm_bytes and ring.flops == wrong.flops
    t_ring, t_wrong = program_seconds(runs["ring"], "TPU v5e"), program_seconds(runs["wrong"], "TPU v5e")
    assert t_wrong == pytest.approx(wrong.compute_s + wrong.comm_s)   # nothing overlaps
    assert t_ring < ring.compute_s + ring.comm_s                       # each step overlaps
    table = comparison_table(runs, on="TPU v5e")
    estimated = [c for c in table.columns if c.header == "estimated us"][0]._cells
    assert estimated[0] != estimated[1]


@pytest.mark.parametrize("name, functions", [("gather_then_matmul", ["allgather_matmul", "transformer_block"]),
                                             ("gather_then_multiply_and_sum", ["allgather_matmul"]),
                                             ("gather_then_split_sign_sum", ["allgather_matmul"]),
                                             ("reducescatter_product_outside", ["reducescatter_matmul"]),
                                             ("gather_then_flipped_multiply_and_sum", ["allgather_matmul"]),
                                             ("reducescatter_flipped_whole_product", ["reducescatter_matmul"]),
                                             ("gather_then_outer_product_summed_by_scatter", ["allgather_matmul"])])
def test_a_matmul_of_every_block_at_once_leaves_nothing_to_overlap(grade, name, functions):
    """A ring of permutes that only gathers A (one matmul of the whole gathered operand after
    it, as a dot, or as a multiply and a sum, its positive and negative parts perhaps summed
    apart, or its elements flipped before the sum, or every pairwise product made at once and
    summed by a scatter-add), and a reduce-scatter ring beside the whole partial
    product made by jax.jit outside the shard_map: the permute count and sizes right, values
    right, and the rule lost on every mesh with a ring (nY >= 2), naming the matmul that does
    nY steps' work at once."""
    result = grade(name, only=functions)
    for function in functions:
        part = result.part(function)
        for c in part.cases:
            ring = c.case.mesh[1] >= 2
            assert c.values_ok and c.rule_ok == (not ring), (function, c.case.label, c.messages)
            if ring:
                assert re.search(r"one matmul in the program does [\d,]+ FLOPs per device at once, [\d.]+ times "
                                 r"one ring step's; allowed: at most [\d,]+ \(one ring step's block product",
                                 "; ".join(c.messages)), c.messages
        assert part.score < part.max_score


@pytest.mark.parametrize("name", ["blocks_after_the_ring", "unrolled_ring_then_block_loop",
                                  "blocks_as_multiply_and_sum_outside_the_ring"])
def test_block_products_in_a_loop_of_their_own_overlap_nothing(grade, name):
    """A ring that only moves data (gathering A, or adding partial blocks all made before it),
    with every block's product (a dot, or a multiply and a sum) in a loop of its own before or
    after it: each product one block's
    size, values right, but the matmuls outside the ring exceed the first (or last) block's and
    one a partly unrolled loop may leave out, on every mesh with nY >= 3 (with nY = 2, where XLA
    inlines a one-step loop, as what each product waits for shows); a ring unrolled in
    Python is read by what each product waits for, not by where it is written."""
    functions = ["allgather_matmul", "reducescatter_matmul"] + (["transformer_block"] if name == "blocks_after_the_ring" else [])
    result = grade(name, only=functions)
    for function in functions:
        part = result.part(function)
        for c in part.cases:
            assert c.values_ok, (function, c.case.label, c.messages)
            assert c.rule_ok or c.case.mesh[1] >= 2, (function, c.case.label, c.messages)  # no ring, nothing to overlap
            assert not c.rule_ok or c.case.mesh[1] < 3, (function, c.case.label)
            if c.case.mesh[1] >= 3:
                assert re.search(r"the program does [\d,]+ FLOPs of matmuls per device outside the ring, where no "
                                 r"communication runs beside them \([\d.]+ block products\); allowed: at most "
                                 r"[\d,]+ \(\d block products", "; ".join(c.messages)), c.messages
        assert part.score < part.max_score


WHOLE_THEN_SPLIT = (r"one matmul in the program does [\d,]+ FLOPs per device at once; allowed: at most [\d,]+ \(90% of "
                    r"the whole local product's 2\(B/nX\)\(D/nY\)F FLOPs, so that each piece is multiplied on its "
                    r"own\)\. The whole product is made before any piece of it is reduced, .*")
MATMULS_THEN_SPLIT = (r"a piece of the reduction over Y is computed from [\d,]+ FLOPs of matmuls per device; allowed: "
                      r"at most [\d,]+ \(90% of the whole local product's .*\)\. The pieces are slices of one product "
                      r"made whole first \(by more than one matmul, or in a loop\), .*")


@pytest.mark.parametrize("name, message", [("whole_product_then_split", WHOLE_THEN_SPLIT),
                                           ("whole_product_by_halves_of_d_then_split", MATMULS_THEN_SPLIT),
                                           ("whole_product_in_a_loop_then_split", MATMULS_THEN_SPLIT)])
def test_a_whole_product_reduced_in_pieces_overlaps_nothing(grade, name, message):
    """allreduce_matmul that makes the whole partial product (in one matmul, in two over halves
    of the contracting dimension, added, or in a loop of its own, each run's work counted), then
    psums its pieces: pieces and the bytes of
    one all-reduce, values right, but the rule lost on every mesh with nY >= 2, naming the
    matmul work a piece waits for and telling the student to multiply each piece just before its
    psum; on 8x1 (nothing to reduce) the rule holds. The solution's pieces, each its own
    matmul, pass (test_solution_full_marks_as_module_and_notebook)."""
    part = grade(name, only=["allreduce_matmul"]).part("allreduce_matmul")
    for c in part.cases:
        assert c.values_ok and c.rule_ok == (c.case.mesh[1] < 2), (c.case.label, c.messages)
        if c.case.mesh[1] >= 2:
            assert len(c.messages) == 1, c.messages
            assert re.fullmatch(message + r"Multiply each piece just before its psum \(a @ w\[:, piece\]\), not the "
                                          r"whole product sliced afterwards\.", c.messages[0]), c.messages
    assert part.score < part.max_score


def test_every_block_made_in_one_run_of_the_ring_overlaps_nothing(grade):
    """A ring loop whose first run makes every block's product (a lax.cond on the step), then
    only adds blocks made already: each dot one block's and inside the loop, values right, but
    the rule lost on every mesh with nY >= 3, naming the matmul work of one run of the loop
    against one block per step. On nY = 2 the one step runs beside the products (the rule holds)."""
    part = grade("all_blocks_in_the_first_step", only=["reducescatter_matmul"]).part("reducescatter_matmul")
    for c in part.cases:
        assert c.values_ok and c.rule_ok == (c.case.mesh[1] < 3), (c.case.label, c.messages)
        if c.case.mesh[1] >= 3:
            assert re.search(r"one run of the ring's loop does [\d,]+ FLOPs of matmuls per device beside its 1 "
                             r"collective\(s\) over Y \(\d block products\); allowed: at most one block product per "
                             r"step", "; ".join(c.messages)), c.messages
    assert part.score < part.max_score


@pytest.mark.parametrize("name, function", [("send_waits_for_the_product", "allgather_matmul"),
                                            ("product_waits_for_the_block", "reducescatter_matmul")])
def test_a_ring_made_to_run_in_turn_overlaps_nothing(grade, name, function):
    """A ring loop whose sends wait for the step's product, or whose products wait for the
    step's block, through a data dependency that changes no value: one block per dot, inside
    the loop, values right, but no permute of this run or the next can run beside a product, so
    the rule is lost on every mesh with nY >= 3 (on nY = 2 the products outside the one step
    stay within the allowance of two blocks), naming the matmuls that nothing runs beside."""
    part = grade(name, only=[function]).part(function)
    for c in part.cases:
        assert c.values_ok and c.rule_ok == (c.case.mesh[1] < 3), (c.case.label, c.messages)
        if c.case.mesh[1] >= 3:
            assert re.search(r"the program does [\d,]+ FLOPs of matmuls per device outside the ring, where no "
                             r"communication runs beside them", "; ".join(c.messages)), c.messages
    assert part.score < part.max_score


def test_a_sum_sent_in_its_own_step_of_a_rolled_loop_earns_full_marks(grade):
    """The book's "permute the result as you accumulate it" in a rolled fori_loop: acc =
    ppermute(acc + partial(block)), the last block added after the loop. Each product runs beside
    the last step's send, as in the same loop unrolled: full marks on every mesh."""
    part = grade("add_then_send_rolled", only=["reducescatter_matmul"]).part("reducescatter_matmul")
    assert all(c.values_ok and c.rule_ok for c in part.cases), part.output
    assert part.score == POINTS["reducescatter_matmul"]


def test_block_products_fused_with_the_running_sum_earn_full_marks(grade):
    """A reduce-scatter ring whose block products are a broadcast multiply and a sum inside the
    loop: XLA fuses each with the add of the permuted running sum, and the fused kernel reads
    the permuted value, yet the product needs only its own operands. Full marks for the ring
    and for the transformer block built on it, on every mesh (it scored 3/4 and 0.75/1)."""
    functions = ["reducescatter_matmul", "transformer_block"]
    result = grade("block_products_as_multiply_and_sum_fused_with_the_sum", only=functions)
    for function in functions:
        part = result.part(function)
        assert all(c.values_ok and c.rule_ok for c in part.cases), part.output
        assert part.score == POINTS[function]


def test_block_products_in_a_loop_of_unknown_length_are_not_counted_once(grade):
    """A ring that only moves data, every block's dot in a while_loop whose bound the compiler
    cannot know (always nY): counted once, its dots looked like one block's work. Values right;
    the rule lost on every mesh with a ring (nY >= 2), saying the loop's work cannot be counted
    and to use static bounds."""
    functions = ["allgather_matmul", "reducescatter_matmul"]
    result = grade("blocks_in_a_loop_of_unknown_length", only=functions)
    for function in functions:
        part = result.part(function)
        for c in part.cases:
            assert c.values_ok and c.rule_ok == (c.case.mesh[1] < 2), (function, c.case.label, c.messages)
            if c.case.mesh[1] >= 2:
                assert any(p.startswith("the program multiplies inside a loop whose trip count is not known at "
                                        "compile time") and "jax.lax.fori_loop with Python ints" in p
                           for p in c.messages), c.messages
        assert part.score < part.max_score


def test_a_whole_product_reduced_by_a_ring_of_permutes_overlaps_nothing(grade):
    """allreduce_matmul that makes the whole partial product first, then all-reduces it with a
    ring of permutes (reduce-scatter ring, then all-gather ring): a permute ring passes the split,
    but its steps have no matmul left to overlap. Values right; the rule lost on every mesh with
    a ring of 4 or more whose F the ring divides, naming the matmuls outside the ring. (F=18 on 4
    leaves a psum of the rest, which can run beside the products; on rings of 3 here one half of
    the product has a contracted size of 1, which XLA:CPU writes as a multiply, and what is left
    is within the allowance of two blocks.)"""
    part = grade("whole_product_then_permute_ring", only=["allreduce_matmul"]).part("allreduce_matmul")
    for c in part.cases:
        assert c.values_ok, (c.case.label, c.messages)
        assert c.rule_ok or c.case.mesh[1] >= 2, (c.case.label, c.messages)
        if c.case.mesh[1] >= 4 and c.case.sizes["F"] % c.case.mesh[1] == 0:
            assert not c.rule_ok, c.case.label
            assert any(re.match(r"the reduction over Y runs as a ring of collective-permutes, but the program does "
                                r"[\d,]+ FLOPs of matmuls per device outside the ring, where no communication runs "
                                r"beside them", p) for p in c.messages), (c.case.label, c.messages)
    assert part.score < part.max_score


def test_a_whole_product_made_by_rank1_updates_apart_from_the_ring_overlaps_nothing(grade):
    """Rings that only move data, the whole product made apart from them in a fori_loop of
    rank-1 updates (a multiply of two broadcasts per run, no dot): values right; the rule lost on
    every mesh with a ring of 3 or more (on 2 the allowance of two blocks is the whole product),
    naming the matmuls outside the ring."""
    functions = ["allgather_matmul", "reducescatter_matmul"]
    result = grade("whole_product_by_rank1_updates_outside_the_ring", only=functions)
    for function in functions:
        part = result.part(function)
        for c in part.cases:
            assert c.values_ok and c.rule_ok == (c.case.mesh[1] < 3), (function, c.case.label, c.messages)
            if c.case.mesh[1] >= 3:
                assert any(re.match(r"the program does [\d,]+ FLOPs of matmuls per device outside the ring", p)
                           for p in c.messages), c.messages
        assert part.score < part.max_score


def test_an_all_to_all_of_copies_is_an_all_gather(grade):
    """allreduce_matmul that reduces each piece with an all_to_all and a local sum, then sends
    the summed block back with an all_to_all of a broadcast copy of it (every block the same
    value: an all-gather). Values right; the no-all-gather rule lost on every mesh with nY >= 2,
    saying why the all-to-all counts as one."""
    part = grade("gather_by_all_to_all", only=["allreduce_matmul"]).part("allreduce_matmul")
    for c in part.cases:
        assert c.values_ok and c.rule_ok == (c.case.mesh[1] < 2), (c.case.label, c.messages)
        if c.case.mesh[1] >= 2:
            assert any(re.match(r"communication observed: all-to-all over Y of .* \(an all-to-all whose blocks are "
                                r"all copies of one value sends every device that value, as an all-gather does, and "
                                r"counts as one\); allowed: no all-gather", p) for p in c.messages), c.messages
    assert part.score < part.max_score


def test_every_corpus_file_is_tested():
    """Is every submission in tests/submissions/problem3 graded above?"""
    tested = {"unrolled_reverse_ring", "plain_jit", "psum_then_slice", "full_accumulators", "one_psum",
              "hardcoded_ny", "no_pcast", "gelu_erf", "relu_block", "padded_pieces", "wrong_psum_axis",
              "wrong_psum_axis_checked", "ring_walks_the_other_way", "missing_callee", "gather_then_matmul",
              "gather_then_multiply_and_sum", "gather_then_split_sign_sum", "reducescatter_product_outside",
              "blocks_after_the_ring", "unrolled_ring_then_block_loop", "whole_product_then_split",
              "whole_product_by_halves_of_d_then_split",
              "gather_then_flipped_multiply_and_sum", "reducescatter_flipped_whole_product",
              "all_blocks_in_the_first_step", "send_waits_for_the_product", "product_waits_for_the_block",
              "gather_then_outer_product_summed_by_scatter", "add_then_send_rolled",
              "blocks_as_multiply_and_sum_outside_the_ring", "blocks_in_a_loop_of_unknown_length",
              "whole_product_in_a_loop_then_split", "whole_product_then_permute_ring", "gather_by_all_to_all",
              "whole_product_by_rank1_updates_outside_the_ring",
              "block_products_as_multiply_and_sum_fused_with_the_sum"}
    assert {f[:-3] for f in os.listdir(CORPUS) if f.endswith(".py")} == tested


def test_a_program_that_does_not_compile_names_the_check_that_shows_it():
    """A hidden case whose program XLA refuses (a shard_map manual over Y alone with a psum over
    a one-device axis does, on an 8x1 mesh): does its message name the call that compiles the
    same case where the student can see it? (Bytes that are no program at all stand in for it.)"""
    from graders.hidden import hidden_cases, hidden_inputs
    from graders.sandboxed import judge

    assignment = get_assignment("problem3")
    part = assignment.part("allreduce_matmul")
    case = hidden_cases(assignment)[part.name][0]
    result = judge.judge_artifact(part, case, b"not a program", hidden_inputs(assignment, part, case, 1), {})
    [message] = result.messages
    assert message.startswith("the exported program could not be compiled: ")
    assert message.endswith(f"; to see it, run check(allreduce_matmul, case={case.label!r})")
    assert not result.ran
