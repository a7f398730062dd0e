"""The warm-up's graders against its solution, its stub and a corpus of typical mistakes.

Each file in `tests/submissions/warmup/` is the solution with ONE function broken. The
solution and the stub are graded whole (every function, every mesh: 2x4, 4x2, 1x3, 1x1);
a corpus file is graded on its broken function only (`only=`), which is all it changes,
so the file stays fast. Scores are exact: the hidden cases make them deterministic.
"""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from grading import cached_grader

from assignments.contract import Case, Tree, arg_leaves, case_request
from assignments.contracts import get_assignment
from assignments.contract import make_inputs
from graders import Limits
from graders.hidden import hidden_cases

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "warmup")
SOLUTION_PY = os.path.join(REPO_ROOT, "solutions", "warmup.py")
SOLUTION_NB = os.path.join(REPO_ROOT, "solutions", "warmup", "warmup.ipynb")
RELEASE_NB = os.path.join(REPO_ROOT, "release", "warmup", "warmup.ipynb")
WARMUP = get_assignment("warmup")
FAST = Limits(cell_timeout=20, case_timeout=20, stall_timeout=60)
MESHES = {(2, 4), (4, 2), (1, 3), (1, 1)}


@pytest.fixture(scope="module")
def grade():
    return cached_grader("warmup", CORPUS, FAST)


def broken(grade, name: str, function: str, share: float, message: str):
    """Grade corpus file `name` on `function`; check that it earns exactly `share` of the
    function's points (rounded as the graders round a part's score) and its message."""
    part = grade(name, only=[function]).part(function)
    assert part.score == pytest.approx(round(WARMUP.part(function).points * share, 2)), part.output
    assert re.search(message, part.output), part.output
    return part


def mesh_of_passing_cases(part) -> set:
    return {c.case.mesh for c in part.cases if c.passed}


# --- the contract and the hidden cases ------------------------------------------------------


def test_hidden_cases_cover_every_mesh_with_sizes_unlike_the_visible_check():
    """Is every function graded on 2x4, 4x2, 1x3 and 1x1, never at the visible check's sizes?"""
    cases = hidden_cases(WARMUP)
    for part in WARMUP.parts:
        assert {c.mesh for c in cases[part.name]} == MESHES, part.name
        assert part.visible_case.sizes not in [c.sizes for c in cases[part.name]], part.name


def test_tree_arguments_reach_the_exporter_as_nested_specs():
    """Does the params pytree travel to the export worker as a nested request, and do inputs
    and the result description follow the same nesting?"""
    part = WARMUP.part("dp_train_step")
    case = Case((2, 4), {"Bt": 16}, {"lr": 0.1})
    request = json.loads(json.dumps(case_request(part, case, "x")))  # as the worker reads it
    assert request["args"][0] == {"tree": [{"shape": [], "dtype": "float32", "spec": []}] * 2}
    assert request["args"][1] == {"shape": [16, 1], "dtype": "float32", "spec": [["X", "Y"]]}
    params, xs, ys = make_inputs(part, case, 0)
    assert isinstance(params, tuple) and [p.shape for p in params] == [(), ()]
    assert isinstance(part.result, Tree) and [a.name for a in arg_leaves(part.result)] == ["w", "b", "loss"]
    (w, b), loss = part.reference(params, xs.astype(np.float64), ys.astype(np.float64),
                                  mesh=case.mesh, lr=0.1)
    assert np.isfinite([w, b, loss]).all()


def test_explicit_part_asks_for_an_explicit_mesh():
    """Does the Explicit-mode function's case request carry its axis types (and no other's)?"""
    for part in WARMUP.parts:
        request = case_request(part, part.visible_case, "x")
        assert request["axis_types"] == ("explicit" if part.name == "explicit_matmul" else "auto")


# --- right answers and the untouched stub -----------------------------------------------------


@pytest.mark.parametrize("path", [SOLUTION_PY, SOLUTION_NB], ids=["module", "notebook"])
def test_solution_gets_full_marks_on_every_mesh(grade, path):
    """Does the solution, as a module and as the solutions notebook, get full marks on every
    mesh, the 3-device and 1-device ones included?"""
    result = grade(path)
    assert result.messages == []
    assert result.score == result.max_score == WARMUP.max_score
    for part in result.parts:
        assert part.passed, part.output
        assert mesh_of_passing_cases(part) == MESHES


def test_release_stub_gets_zero(grade):
    """Does the released notebook, untouched, get 0, every part saying "not implemented"?"""
    result = grade(RELEASE_NB)
    assert result.score == 0
    for part in result.parts:
        assert re.search(r"not implemented \(the function raises NotImplementedError\)", part.output)


# --- the "done when": weights gathered, batch gathered, gradients not averaged --------


def test_layer_that_gathers_the_weights_loses_the_communication_half(grade):
    """Does a shard_map layer that all-gathers x and w keep its values but lose the
    communication half on every mesh: for its all-gathers wherever there is more than one
    device, and for the psum it never writes (shown on those meshes) on the one-device mesh too?"""
    part = broken(grade, "layer_gathers_weights", "layer_shard_map", 1 / 2,
                  r"all-gather over X\+Y of f32\[\d+,\d+\].*allowed: only all-reduce\. "
                  r"Each device already holds the rows of w")
    assert all(c.values_ok for c in part.cases)
    assert mesh_of_passing_cases(part) == set()
    [one_device] = [c for c in part.cases if c.case.mesh == (1, 1)]
    assert one_device.messages == ["layer_shard_map must communicate with jax.lax.psum inside its shard_map, but the "
                                   "program calls none: its communication was inserted by jax.jit around the "
                                   "shard_map. Do the work inside the shard_map and write the jax.lax.psum yourself. "
                                   "(seen on the 2x4 mesh: a mesh with a one-device axis cannot show it)"]


def test_training_step_that_gathers_the_batch_loses_the_communication_half(grade):
    """Does a step that constrains the batch to be replicated (an all-gather of xs and ys)
    keep its values but lose the communication half?"""
    part = broken(grade, "dp_gathers_batch", "dp_train_step", 5 / 8,
                  r"all-gather over .* of f32\[\d+,1\].*allowed: only all-reduce\. "
                  r"Each device needs only the gradient")
    assert all(c.values_ok for c in part.cases)
    for c in part.cases:  # one fault, one message
        assert sum("all-gather" in p for p in c.messages) <= 1, c.messages


def test_a_batch_gathered_by_psum_is_still_a_gather():
    """Is an all-gather written as a psum of zero-padded shards (every device then holds the
    whole batch) refused by its size, while the gradient's and the loss's few numbers pass?"""
    from assignments.hlo import ArrayShape, Collective, ProgramAnalysis

    rule = WARMUP.part("dp_train_step").rule
    case = Case((2, 4), {"Bt": 40}, {"lr": 0.1})

    def psum(*dims):
        return Collective("all-reduce", ("X", "Y"), tuple(ArrayShape("f32", d) for d in dims), (), 1, 8)

    [message] = rule.violations(ProgramAnalysis((psum((8, 5, 1), (8, 5, 1)),), (), None, 8), case)
    assert message.startswith("sends 320 bytes per device; allowed: at most 156 (Bt-1 float32 values, fewer "
                              "than the batch")
    assert rule.violations(ProgramAnalysis((psum((), (), ()),), (), None, 8), case) == []


def test_weights_gathered_by_all_to_all_beside_the_one_psum_are_refused():
    """layer_shard_map's one psum of M elements is right, but x and w also travel, as tiled
    copies through all-to-alls: is that refused (the reduction is all it may communicate)?"""
    from assignments.hlo import ArrayShape, Collective, ProgramAnalysis

    rule = WARMUP.part("layer_shard_map").rule
    case = Case((2, 4), {"K": 24, "M": 3})
    psum = Collective("all-reduce", ("X", "Y"), (ArrayShape("f32", (3,)),), (), 1, 8)
    tiles = Collective("all-to-all", ("X", "Y"), (ArrayShape("f32", (1, 3, 3)),) * 8, (), 1, 8)
    assert rule.violations(ProgramAnalysis((psum,), (), None, 8), case) == []
    [message] = rule.violations(ProgramAnalysis((psum, tiles), (), None, 8), case)
    assert message.startswith("communication observed: all-to-all over X+Y of f32[1,3,3]")
    assert "allowed: only all-reduce. Each device already holds the rows of w" in message


def test_an_identity_shard_map_beside_jit_work_is_no_shard_map_part(mesh_2x4):
    """A shard_map that returns its block unchanged, with jax.jit doing the sum around it, lowers
    with no psum (jax.jit's all-reduce appears only when XLA partitions the program): is it told
    to do the work inside its shard_map (the sum jax.jit does around it named), and a shard_map
    that sums with no psum to write one, while the psum written there passes?"""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from assignments.style_rules import style_problems

    part = WARMUP.part("layer_shard_map")
    case = Case((2, 4), {"K": 24, "M": 3})
    x = jax.device_put(np.ones(24, np.float32), NamedSharding(mesh_2x4, P(("X", "Y"))))  # as graded: split
    identity = jax.shard_map(lambda b: b, mesh=mesh_2x4, in_specs=P(("X", "Y")), out_specs=P(("X", "Y")))
    decoy = jax.jit(lambda v: identity(v).sum()).lower(x).as_text()
    [message] = [p.message for p in style_problems(part, case, decoy)]
    assert message.startswith("layer_shard_map must do its work inside its shard_map, but jax.jit computes "
                              "around it (reduce outside the shard_map)")
    local = jax.shard_map(lambda b: b.sum(keepdims=True), mesh=mesh_2x4, in_specs=P(("X", "Y")),
                          out_specs=P(("X", "Y")))
    [message] = [p.message for p in style_problems(part, case, jax.jit(local).lower(x).as_text())]
    assert message.startswith("layer_shard_map must communicate with jax.lax.psum inside its shard_map")
    psum = jax.shard_map(lambda b: jax.lax.psum(b.sum(), ("X", "Y")), mesh=mesh_2x4, in_specs=P(("X", "Y")),
                         out_specs=P())
    assert style_problems(part, case, jax.jit(psum).lower(x).as_text()) == []


def test_a_block_declared_replicated_without_a_collective_is_still_split(mesh_2x4):
    """A shard_map that hands each device's block out as replicated (out_specs=P(), which
    check_vma=False lets it declare with no psum, or after an all_to_all, which replicates
    nothing), for jax.jit to sum outside: is the sum named as work outside the shard_map, while a block psummed first (or all-gathered) and returned
    replicated is a result jax.jit may tidy?"""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from assignments.style_rules import style_problems

    part = WARMUP.part("total_sum")
    case = Case((2, 4), {"K": 24})
    x = jax.device_put(np.ones(24, np.float32), NamedSharding(mesh_2x4, P(("X", "Y"))))

    def declared(local):
        return jax.shard_map(local, mesh=mesh_2x4, in_specs=P(("X", "Y")), out_specs=P(), check_vma=False)

    lie = jax.jit(lambda v: declared(lambda b: b)(v).sum()).lower(x).as_text()
    [message] = [p.message for p in style_problems(part, case, lie)]
    assert "jax.jit computes around it (reduce outside the shard_map)" in message
    swapped = jax.jit(lambda v: declared(lambda b: jax.lax.all_to_all(jnp.tile(b, 8), ("X", "Y"), 0, 0,
                                                                      tiled=True))(v).sum())
    assert any("computes around it" in p.message for p in style_problems(part, case, swapped.lower(x).as_text()))
    # a psum in groups of one device combines nothing; one over X leaves the blocks split over Y
    alone = jax.jit(lambda v: declared(lambda b: jax.lax.psum(b, ("X", "Y"), axis_index_groups=[[d] for d in range(8)]))(v).sum())
    over_x = jax.jit(lambda v: declared(lambda b: jax.lax.psum(b, "X"))(v).sum())
    for program in (alone, over_x):
        assert any("computes around it (reduce outside" in p.message for p in style_problems(part, case, program.lower(x).as_text()))
    psummed = jax.jit(lambda v: declared(lambda b: jax.lax.psum(b, ("X", "Y")))(v).sum()).lower(x).as_text()
    gathered = jax.jit(lambda v: declared(lambda b: jax.lax.all_gather(b, ("X", "Y"), tiled=True))(v).sum())
    in_turn = jax.jit(lambda v: declared(lambda b: jax.lax.psum(jax.lax.psum(b, "X"), "Y"))(v).sum())
    for program in (psummed, gathered.lower(x).as_text(), in_turn.lower(x).as_text()):
        assert not any("computes around it" in p.message for p in style_problems(part, case, program))


def test_work_in_a_composite_outside_the_shard_map_is_jits_work(mesh_2x4):
    """A jax.lax.composite's body is a function of its own that XLA inlines: is the sum jax.jit
    does in one, around an identity shard_map, named as work outside, while a composite inside
    the shard_map is the shard_map's own work?"""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from assignments.style_rules import style_problems

    part = WARMUP.part("total_sum")
    case = Case((2, 4), {"K": 24})
    x = jax.device_put(np.ones(24, np.float32), NamedSharding(mesh_2x4, P(("X", "Y"))))
    total = jax.lax.composite(lambda b: b.sum(), name="kit.total")

    def shard_map(local, out_specs):
        return jax.shard_map(local, mesh=mesh_2x4, in_specs=P(("X", "Y")), out_specs=out_specs)

    outside = jax.jit(lambda v: total(shard_map(lambda b: b, P(("X", "Y")))(v)))
    inside = jax.jit(shard_map(lambda b: jax.lax.psum(total(b), ("X", "Y")), P()))
    assert any("computes around it (reduce outside" in p.message for p in style_problems(part, case, outside.lower(x).as_text()))
    assert not any("computes around it" in p.message for p in style_problems(part, case, inside.lower(x).as_text()))


def test_tidying_around_a_shard_map_that_did_the_work_passes(mesh_2x4):
    """Work jax.jit does outside a shard_map is refused only on data split over the devices: a
    psum's replicated [1, 1] summed to a scalar, a replicated [1, M] row summed to [M], and the
    small Toeplitz matrix of a replicated w (each once refused) pass, while the same sum on the
    shard_map's split output is jax.jit's work."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from assignments.style_rules import style_problems

    split = P(("X", "Y"))

    def lowered(f, *arrays):
        return jax.jit(f).lower(*arrays).as_text()

    x2 = jax.device_put(np.ones((4, 8), np.float32), NamedSharding(mesh_2x4, P("X", "Y")))
    tidy_sum = jax.shard_map(lambda b: jax.lax.psum(b.sum(keepdims=True), ("X", "Y")), mesh=mesh_2x4,
                             in_specs=P("X", "Y"), out_specs=P())
    copies = jax.shard_map(lambda b: b.sum(keepdims=True), mesh=mesh_2x4, in_specs=P("X", "Y"),
                           out_specs=P("X", "Y"))
    total = WARMUP.part("total_sum")
    case = Case((2, 4), {"R": 4, "C": 8})
    assert style_problems(total, case, lowered(lambda v: tidy_sum(v).sum(), x2)) == []
    [message] = [p.message for p in style_problems(total, case, lowered(lambda v: copies(v).sum(), x2))]
    assert message.startswith("total_sum must do its work inside its shard_map")

    x = jax.device_put(np.ones(24, np.float32), NamedSharding(mesh_2x4, split))
    w = jax.device_put(np.ones((24, 3), np.float32), NamedSharding(mesh_2x4, split))
    row = jax.shard_map(lambda x, w: jax.lax.psum(x[None] @ w, ("X", "Y")), mesh=mesh_2x4,
                        in_specs=(split, split), out_specs=P())
    layer = WARMUP.part("layer_shard_map")
    assert style_problems(layer, Case((2, 4), {"K": 24, "M": 3}),
                           lowered(lambda x, w: jax.nn.sigmoid(row(x, w).sum(0)), x, w)) == []

    xs = jax.device_put(np.ones((8, 6), np.float32), NamedSharding(mesh_2x4, split))
    taps = jax.device_put(np.ones(3, np.float32), NamedSharding(mesh_2x4, P()))

    def toeplitz(xs, w):
        T = jnp.einsum("k,kij->ij", w, jnp.stack([jnp.eye(6, 4, -k) for k in range(3)]))  # outside: from w

        def local(block, T):
            c = block @ T
            return c / jax.lax.psum(c, ("X", "Y"))

        return jax.shard_map(local, mesh=mesh_2x4, in_specs=(split, P()), out_specs=split)(xs, T)

    conv = WARMUP.part("normalized_convolution")
    assert style_problems(conv, Case((2, 4), {"N": 8, "L": 6, "Lc": 4}), lowered(toeplitz, xs, taps)) == []


def test_a_shard_map_lowered_by_gspmd_is_refused_naming_the_flag(mesh_2x4):
    """The work-inside check reads Shardy's manual computations. A cell that turns the flag
    off lowers shard_maps with GSPMD, which would skip the check (an identity shard_map beside
    jax.jit's sum would pass): is such a program refused, saying which flag to leave alone?"""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    from assignments.style_rules import style_problems

    x = jax.device_put(np.ones((4, 8), np.float32), NamedSharding(mesh_2x4, P("X", "Y")))
    psum = jax.shard_map(lambda b: jax.lax.psum(b.sum(), ("X", "Y")), mesh=mesh_2x4, in_specs=P("X", "Y"),
                         out_specs=P())
    total, case = WARMUP.part("total_sum"), Case((2, 4), {"R": 4, "C": 8})
    assert style_problems(total, case, jax.jit(psum).lower(x).as_text()) == []
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        text = jax.jit(psum).lower(x).as_text()
    finally:
        jax.config.update("jax_use_shardy_partitioner", True)
    [message] = [p.message for p in style_problems(total, case, text)]
    assert "jax_use_shardy_partitioner was turned off" in message and message.startswith("total_sum must ")


def test_pmap_update_ported_as_is_steps_n_times_too_far(grade):
    """Does the pmap tutorial's pmean of the gradients, under shard_map with check_vma on,
    fail the comparison with the single-device step on every mesh of more than one device,
    with a message that names the over-count?"""
    part = broken(grade, "dp_pmean_trap", "dp_train_step", 1 / 4,
                  r"w: values wrong: .*b: values wrong: .*summed over the devices")
    assert mesh_of_passing_cases(part) == {(1, 1)}
    for c in part.cases:
        if not c.passed:
            assert not any(p.startswith("loss:") for p in c.messages), "the loss itself is right"


def test_step_that_never_averages_gradients_is_wrong(grade):
    """Does a step with check_vma off and no pmean (each device steps on its own gradient)
    lose the values on every mesh of more than one device?"""
    part = broken(grade, "dp_no_average", "dp_train_step", 1 / 4, r"w: values wrong")
    assert mesh_of_passing_cases(part) == {(1, 1)}


def test_step_that_returns_no_loss_is_told_the_expected_structure(grade):
    """Does returning only the new parameters say which structure was expected?"""
    broken(grade, "dp_returns_params_only", "dp_train_step", 0,
           r"returned 2 value\(s\) \(tuple\); expected 3 arrays in the structure "
           r"out = \(new_params = \(w: float32\[\] at P\(\), b: float32\[\] at P\(\)\), loss")


# --- the other functions' typical mistakes ---------------------------------------------------


def test_layer_without_its_constraints_does_not_shard_the_work(grade):
    """Does layer_constrained with no constraint (nothing communicated, nothing split) lose
    the communication half, saying one all-reduce was expected?"""
    part = broken(grade, "layer_not_constrained", "layer_constrained", 5 / 8,
                  r"no all-reduce in the program \(the program communicates nothing\); allowed: exactly 1")
    assert all(c.values_ok for c in part.cases)
    assert "the work is not split over X (2 devices) and Y (4 devices)" in part.output


def test_layer_split_over_one_axis_is_told_which_axis_it_split():
    """Is a layer_constrained whose constraints split K over X only told that, where X has
    devices (an all-reduce over X only), and where it has none (nothing is communicated: the
    work was not split over Y), rather than a count of all-reduces?"""
    from assignments.contract import Case
    from assignments.hlo import ArrayShape, Collective, ProgramAnalysis

    part = get_assignment("warmup").part("layer_constrained")
    over_x = Collective("all-reduce", ("X",), (ArrayShape("f32", (4,)),), (ArrayShape("f32", (4,)),), 1, 2)
    sizes = part.visible_case.sizes
    problems = part.rule.violations(ProgramAnalysis((over_x,), (), None, 8), Case((2, 4), sizes))
    assert problems == [
        "the work is split over X only, not over Y (4 devices): the all-reduce that adds the devices' partial "
        "results runs over X (all-reduce over X of f32[4] (16 bytes) x1); allowed: one over X and Y. Constrain x "
        "and w to be sharded on K over both axes, P(('X', 'Y')), so that every device multiplies its own slice "
        "and the all-reduce XLA inserts adds them all"]
    problems = part.rule.violations(ProgramAnalysis((), (), None, 3), Case((1, 3), sizes))
    assert problems[0] == "no all-reduce in the program (the program communicates nothing); allowed: exactly 1"
    assert problems[1].startswith("the work is not split over Y (3 devices): no all-reduce adds the devices' "
                                  "partial results (the program communicates nothing); allowed: one over Y.")
    assert not any("time(s)" in p for p in problems)
    assert part.rule.violations(ProgramAnalysis((), (), None, 1), Case((1, 1), sizes)) == []


def test_placing_inside_jit_fails_clearly(grade):
    """Does device_put inside jax.jit (JAX refuses the one-device input) fail every mesh of more
    than one device with JAX's reason? (On the 1x1 mesh it is right: one device, nothing to refuse.)"""
    part = broken(grade, "place_inside_jit", "place", 1 / 4,
                  r"raised while tracing: ValueError .*incompatible devices")
    assert mesh_of_passing_cases(part) == {(1, 1)}


def test_sum_left_to_the_compiler_has_the_wrong_sharding(grade):
    """Does x.sum(0) without a constraint (sharded over Y only) fail where X has more than one device?"""
    part = broken(grade, "sum_rows_no_constraint", "sum_rows_fully_sharded", 1 / 2,
                  r"wrong sharding: got P\('Y',\), expected P\(\('X', 'Y'\),\)")
    assert mesh_of_passing_cases(part) == {(1, 3), (1, 1)}


def test_two_psums_are_one_too_many(grade):
    """Does summing over X and then over Y (two all-reduces) lose the communication half where
    both axes have more than one device?"""
    part = broken(grade, "total_sum_two_psums", "total_sum", 3 / 4,
                  r"all-reduce runs 2 time\(s\); allowed: exactly 1")
    assert mesh_of_passing_cases(part) == {(1, 3), (1, 1)}


def test_convolution_written_for_the_visible_sizes_fails_elsewhere(grade):
    """Does a convolution with the visible check's row length hard-coded fail on other sizes?"""
    part = broken(grade, "convolution_hardcoded_rows", "normalized_convolution", 0,
                  r"wrong shape: got \(8, 3\), expected \(8, 4\)")
    assert mesh_of_passing_cases(part) == set()


def test_ambiguous_matmul_on_an_explicit_mesh_is_a_type_error(grade):
    """Does a plain x @ w on the Explicit mesh score 0 with JAX's request for out_sharding?"""
    broken(grade, "explicit_plain_matmul", "explicit_matmul", 0,
           r"ShardingTypeError .*specify the output sharding via the `out_sharding` parameter")


def test_resolving_the_ambiguity_by_gathering_loses_the_communication_half(grade):
    """Does resharding x to gather its columns keep the values but lose the communication half?"""
    part = broken(grade, "explicit_reshard_gather", "explicit_matmul", 5 / 8,
                  r"all-gather over Y .*allowed: only all-reduce, reduce-scatter\. .*out_sharding=")
    assert all(c.values_ok for c in part.cases)
    for c in part.cases:  # one fault, one message
        assert sum("all-gather" in p for p in c.messages) <= 1, c.messages


def test_wrong_sharding_on_an_explicit_mesh_points_at_out_sharding(grade):
    """Does a matmul given the wrong out_sharding fail its values (sharding) wherever Y splits
    the output, with a hint about out_sharding= on the operation
    (not out_shardings on jax.jit)?"""
    part = grade("explicit_wrong_sharding", only=["explicit_matmul"]).part("explicit_matmul")
    assert part.score == pytest.approx(part.max_score / 4, abs=0.01)  # 1 case of 4 passes
    assert re.search(r"wrong sharding: got P\('X', None\), expected P\('X', 'Y'\) \(on an Explicit "
                     r"mesh .*pass out_sharding= to the operation", part.output), part.output
    assert "out_shardings to jax.jit" not in part.output
    assert mesh_of_passing_cases(part) == {(1, 1)}


def test_hard_coded_learning_rate_is_not_blamed_on_pmean(grade):
    """Does a step with lr hard-coded to 0.1 fail the cases with another lr, without the
    pmean hint (which is for a step exactly N times too long)?"""
    part = grade("dp_hardcoded_lr", only=["dp_train_step"]).part("dp_train_step")
    assert part.score == pytest.approx(part.max_score / 4, abs=0.01)  # 1 case of 4 passes
    assert re.search(r"w: values wrong", part.output), part.output
    assert "summed over the devices" not in part.output
    assert {c.case.statics["lr"] for c in part.cases if c.passed} == {0.1}


def test_bfloat16_round_trip_in_place_is_caught(grade):
    """Does placing x after a bfloat16 round trip (exact on small integers, not on random floats)
    lose place's values on every mesh?"""
    part = broken(grade, "place_bf16_roundtrip", "place", 0, r"values wrong")
    assert mesh_of_passing_cases(part) == set()


def test_a_replicated_result_is_checked_on_every_copy():
    """total_sum's scalar is replicated: a shard_map that returns the sum on one device and 7.0
    on every other (out_specs P(), check_vma=False) reads back right from the first copy. Does
    the check read every device's copy, and say which device holds a wrong one?"""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    from assignments import check

    def total_sum(x, *, mesh):
        def local(block):
            total = jax.lax.psum(block.sum(), ("X", "Y"))
            first = (jax.lax.axis_index("X") == 0) & (jax.lax.axis_index("Y") == 0)
            return jnp.where(first, total, 7.0)
        return jax.shard_map(local, mesh=mesh, in_specs=P("X", "Y"), out_specs=P(), check_vma=False)(x)

    result = check(total_sum, show=False, raises=False)
    assert not result.passed
    assert any(re.match(r"values wrong on device \d+, in its copy of the whole result: ", p) for p in result.messages), \
        result.messages


@pytest.mark.parametrize("function, outside", [("total_sum", "reduce"), ("layer_shard_map", "dot_general"),
                                               ("normalized_convolution", "dot_general, reduce")])
def test_a_psum_the_compiler_drops_leaves_the_work_to_jit(grade, function, outside):
    """A shard_map that writes its psum but throws it away (jnp.where(False, ...), folded by
    XLA), with jax.jit doing the work around it and the partitioner's all-reduce meeting the
    rule: the values half only, the style naming what jax.jit computes outside."""
    part = broken(grade, "psum_thrown_away", function, 1 / 2,
                  rf"{function} must do its work inside its shard_map, but jax.jit computes around it "
                  rf"\({outside} outside the shard_map\)")
    judged = [c for c in part.cases if min(c.case.mesh) > 1]
    assert judged and all(c.values_ok and not c.rule_ok for c in judged), part.output


@pytest.mark.parametrize("function", ["total_sum", "layer_shard_map", "normalized_convolution"])
def test_a_sum_written_as_a_scatter_or_slices_outside_the_shard_map_is_jits_work(grade, function):
    """The thrown-away psum again, with jax.jit's work outside written without a reduce or a
    dot: slices added together, and a scatter-add (which XLA partitions into one all-reduce):
    the values half only, naming what jax.jit computes."""
    part = broken(grade, "scatter_add_outside", function, 1 / 2,
                  rf"{function} must do its work inside its shard_map, but jax.jit computes around it "
                  r"\([\w ,]*scatter[\w ,]* outside the shard_map\)")
    judged = [c for c in part.cases if min(c.case.mesh) > 1]
    assert judged and all(c.values_ok and not c.rule_ok for c in judged), part.output
    if function == "total_sum":  # its blocks summed to one number each by slices and adds first
        assert "add of slices" in part.output


def test_a_sum_written_as_a_loop_outside_the_shard_map_is_jits_work(grade):
    """total_sum with each device's block summed by a fori_loop in jax.jit outside the shard_map
    (one slice added to the carry per step: no reduce, no add of two slices), the shard_map
    only psumming one number each: the values half only, naming the loop."""
    part = broken(grade, "total_loop_outside", "total_sum", 1 / 2,
                  r"total_sum must do its work inside its shard_map, but jax.jit computes around it "
                  r"\(while outside the shard_map\)")
    judged = [c for c in part.cases if min(c.case.mesh) > 1]
    assert judged and all(c.values_ok and not c.rule_ok for c in judged), part.output


def test_place_must_return_an_array_jax_made(grade):
    """place returning a jax.Array subclass that only describes the blocks a placed array would
    hold (its shards sliced on the host): refused on every mesh, the message saying what it is."""
    broken(grade, "place_array_subclass", "place", 0,
           r"returned a \w+ \(a subclass of jax.Array, not an array JAX made\); expected a jax.Array")


def test_the_whole_product_beside_a_constrained_decoy_is_no_split(grade):
    """layer_constrained computing x @ w whole on every device, with the constrained product and
    its one all-reduce over every axis folded in times zero: values right, the communication
    the rule asks for, and the rule lost on every mesh for the matmul work each device does."""
    for name in ("layer_whole_product_beside_a_decoy", "layer_whole_product_as_multiply_and_sum",
                 "layer_whole_product_as_convolution"):
        # the second writes the product as a multiply and a sum, the third as a convolution of
        # x with M filters as wide as K: no dot instruction to count
        part = broken(grade, name, "layer_constrained", 1 / 2,
                      r"the program's matmuls \(dots, and multiplies and sums\) do [\d,]+ FLOPs per device; "
                      r"allowed: at most [\d,]+ \(each device multiplies only its share\)")
        assert all(c.values_ok and not c.rule_ok for c in part.cases), (name, part.output)
