"""training: the backward pass of a collective matmul and a sharded (FSDP) training step, graded
on the compiled program across meshes. Each corpus file (tests/submissions/training/) holds only
the functions it tests and is graded once, as an overlay on the solution; the tests below assert
the points it earns and the message a student reads. (The scaffold's per-function tests,
tests/test_training_<function>.py, are folded in here: one module, one cached grader.)"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from grading import cached_grader

from assignments.contracts import get_assignment
from assignments.scaffold import unfilled
from graders import Limits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "training")
TRAINING = get_assignment("training")
POINTS = {p.name: p.points for p in TRAINING.parts}
LIMITS = Limits(cell_timeout=60, case_timeout=60, stall_timeout=120)
GRADS, FSDP, FSDP_JIT = "allgather_matmul_grads", "fsdp_train_step", "fsdp_train_step_jit"


@pytest.fixture(scope="module")
def grade():
    return cached_grader("training", CORPUS, LIMITS)


def scores(result) -> dict[str, float]:
    return {p.name: p.score for p in result.parts}


def only_loses(result, name: str) -> None:
    """Every other function keeps all its points (the overlay's solution)."""
    assert {k: v for k, v in scores(result).items() if k != name} == {k: v for k, v in POINTS.items() if k != name}, \
        result.to_text()


@pytest.mark.parametrize("function", [p.name for p in TRAINING.parts])
def test_every_placeholder_is_filled_in(function, repo_root):
    """Is every placeholder the scaffold wrote (for the assignment and each function) replaced?"""
    left = unfilled("training", function, repo_root)
    assert not left, "placeholders left to fill in:\n" + "\n".join(left)


def test_solution_full_marks_as_module_and_notebook(grade):
    """Do the solutions, as a module and as the solved notebook, get every point on every mesh?"""
    for path in ("solutions/training.py", "solutions/training/training.ipynb"):
        result = grade(os.path.join(REPO_ROOT, path))
        assert scores(result) == POINTS, result.to_text()


def test_stub_scores_zero(grade):
    """Does the released notebook, untouched, score 0 with 'not implemented'?"""
    result = grade(os.path.join(REPO_ROOT, "release", "training", "training.ipynb"))
    assert result.score == 0
    assert all("not implemented" in p.output for p in result.parts)


# --- allgather_matmul_grads: honest designs ----------------------------------------------------

@pytest.mark.parametrize("name", ["vjp_of_the_ring", "gather_a_for_dw", "unrolled_forward_rings", "add_then_send"])
def test_honest_backward_passes_earn_full_marks(grade, name):
    """jax.vjp of the problem-3 ring (the backward ring runs the other way, JAX psums dW per block),
    an all-gather of A's block for dW, both rings unrolled turning the other way with einsum, and a
    ring that adds its term before it sends the sum on: the property is judged, not one spelling."""
    assert scores(grade(name)) == POINTS, grade(name).to_text()


# --- allgather_matmul_grads: mistakes ----------------------------------------------------------

@pytest.mark.parametrize("name", ["plain_jit_grads", "psum_over_y"])
def test_a_sum_over_y_instead_of_the_ring_loses_communication(grade, name):
    """dA summed by an all-reduce over Y (plain jax.jit, or a psum then a slice): right values, and
    on every mesh with nY > 1 the forbidden all-reduce over Y is named with the ring to write."""
    result = grade(name)
    only_loses(result, GRADS)
    part = result.part(GRADS)
    assert all(c.values_ok for c in part.cases)
    assert part.score == pytest.approx(POINTS[GRADS] * (1 + 1 / 6) / 2, abs=0.01)   # only 8x1 is right
    assert re.search(r"C004 communication observed: all-reduce over Y of .*; allowed: no all-reduce over Y\. "
                     r"dA's sum over the Y devices runs in the ring", part.output)


def test_gathering_dout_moves_the_wrong_blocks(grade):
    """dW from dOut gathered over Y (and the whole [D, F] partial dW psummed, then sliced): dOut's
    blocks are not A's (F differs from D on every hidden case), and the bytes are over."""
    result = grade("gather_dout")
    only_loses(result, GRADS)
    part = result.part(GRADS)
    assert part.score == pytest.approx(POINTS[GRADS] * (1 + 1 / 6) / 2, abs=0.01)
    assert re.search(r"C014 over Y, collectives of the wrong size: all-gather over Y of f32\[4,8\]", part.output)
    assert "C006 sends" in part.output


def test_hard_coded_ring_size(grade):
    """Does a ring written for nY = 4 fail on the other meshes?"""
    result = grade("hardcoded_ny")
    only_loses(result, GRADS)
    part = result.part(GRADS)
    assert 0 < part.score < 1
    assert re.search(r"ppermute sources and destinations must be unique", part.output)
    assert "values wrong" in part.output


def test_products_made_before_the_ring_overlap_nothing(grade):
    """dA's ring passing on slices of the whole g @ w.T made before it: right values and bytes, but
    W005 names the products outside the ring where nY >= 3 (on rings of 2 the first and last
    blocks' allowance covers it)."""
    result = grade("products_before_the_ring")
    only_loses(result, GRADS)
    part = result.part(GRADS)
    failing = {c.case.mesh for c in part.cases if not c.rule_ok}
    assert failing == {(2, 4), (1, 8), (1, 3)}, part.output
    assert re.search(r"W005 the program does 2,048 FLOPs of matmuls per device where no permute over Y runs beside "
                     r"them \(8 block products\); allowed: at most 1,536 \(A gathered over Y: its product", part.output)


def test_red_team_a_decoy_ring_beside_the_gather(grade):
    """Red team: A moved twice (a ring of permutes whose result is multiplied by zero, beside the
    all-gather that does the work): C014 counts 3(nY-1) blocks where 2(nY-1) are needed."""
    result = grade("ring_and_gather_of_a")
    only_loses(result, GRADS)
    part = result.part(GRADS)
    assert part.score == pytest.approx(POINTS[GRADS] * (1 + 1 / 6) / 2, abs=0.01)
    assert re.search(r"C014 over Y, 9 block\(s\) move per device .*allowed: exactly 6", part.output)


# --- fsdp_train_step ---------------------------------------------------------------------------

def test_gathering_again_for_the_backward_pass_earns_full_marks(grade):
    """jax.checkpoint around each layer: each weight gathered twice (three passes of the
    parameters), inside the bound; and the jit step with out_shardings only: full marks."""
    assert scores(grade("fsdp_checkpointed")) == POINTS


def test_data_parallel_all_reduce_loses_communication(grade):
    """Weights gathered, the whole gradients psummed (an all-reduce), own rows kept: right values,
    and the all-reduce is named on every mesh with nX > 1."""
    result = grade("data_parallel_all_reduce")
    only_loses(result, FSDP)
    part = result.part(FSDP)
    assert all(c.values_ok for c in part.cases)
    assert part.score == pytest.approx(POINTS[FSDP] * (1 + 1 / 6) / 2, abs=0.01)   # only 1x8 is right
    assert re.search(r"C003 communication observed: all-reduce over X of f32\[16,32\], f32\[32,16\] .*allowed: only "
                     r"all-gather, reduce-scatter\. FSDP gathers each weight", part.output)


def test_local_mean_over_counts_and_the_hint_says_so(grade):
    """The loss as the mean of each device's own rows: the step nX times too long on every mesh
    with nX > 1, and the hint names the over-count."""
    result = grade("local_mean_over_count")
    only_loses(result, FSDP)
    part = result.part(FSDP)
    assert [c.values_ok for c in part.cases].count(True) == 1                      # 1x8: nX = 1
    assert part.score == pytest.approx(POINTS[FSDP] / 6, abs=0.01)
    assert "H001 The step is nX times too long" in part.output


def test_pmap_style_pmean_of_replicated_weights_over_counts(grade):
    """The pmap tutorial ported as is: weights taken whole (in_specs P()), the mean over each
    device's rows, a pmean of gradients that jax.grad already psummed: the step nX times too long
    (the hint says why), and the whole gradients all-reduced (C003)."""
    result = grade("replicated_in_specs_pmean")
    only_loses(result, FSDP)
    part = result.part(FSDP)
    assert [c.values_ok for c in part.cases].count(True) == 1
    assert part.score == pytest.approx(POINTS[FSDP] / 6, abs=0.01)
    assert "so a pmean after it divides nothing" in part.output
    assert re.search(r"C003 communication observed: all-reduce over X", part.output)


@pytest.mark.arithmetic
def test_hard_coded_batch_size(grade):
    """The loss divided by the visible case's B*D = 128: right on the visible case only."""
    result = grade("hardcoded_batch")
    only_loses(result, FSDP)
    part = result.part(FSDP)
    assert [c.case.mesh for c in part.cases if c.values_ok] == [(2, 4)]
    assert "V005 W1: values wrong" in part.output


def test_red_team_gradients_scattered_then_gathered_back(grade):
    """Red team: data parallelism's all-reduce spelled as its two halves (the psum_scatter jax.grad
    writes, then an all_gather of each gradient), own rows kept. Only all-gathers and
    reduce-scatters, within the byte bound (it equals a re-gather of the weights), right values:
    C016 finds the gathered values are computed, not the stored weights."""
    result = grade("scatter_then_gather_gradients")
    only_loses(result, FSDP)
    part = result.part(FSDP)
    assert part.score == pytest.approx(POINTS[FSDP] * (1 + 1 / 6) / 2, abs=0.01)
    assert re.search(r"C016 all-gather over X of a value that is not a stored W1 or W2", part.output)
    assert "C006" not in part.output


# --- fsdp_train_step_jit -----------------------------------------------------------------------

def test_replicated_weights_have_the_wrong_sharding(grade):
    """The updated weights returned replicated (every device storing everything): wrong sharding
    on every mesh, and jax.jit's own layout sends over Y."""
    result = grade("replicated_weights")
    only_loses(result, FSDP_JIT)
    part = result.part(FSDP_JIT)
    assert sum(c.values_ok for c in part.cases) == 1      # 1x8: replicated is the contract's layout too
    assert re.search(r"V004 W1: wrong sharding: got P\(\), expected P\('X', None\)", part.output)


def test_unconstrained_weights_let_jit_use_y(grade):
    """No constraint on the weights where they are used: jax.jit's own layout sends by all-to-all
    (C003), gathers computed values (C016) and, where nY > 1, sends over Y (C015); on 8x1 and 1x8
    it happens to compile to the FSDP step."""
    result = grade("jit_unconstrained")
    only_loses(result, FSDP_JIT)
    part = result.part(FSDP_JIT)
    assert all(c.values_ok for c in part.cases)
    assert not next(c for c in part.cases if c.case.mesh == (2, 4)).rule_ok
    assert "C015 communication over Y: collective-permute over X+Y" in part.output


def test_jit_step_written_with_shard_map_breaks_s001(grade):
    """A shard_map step for the jit-only part: right values and communication, S001 on every case."""
    result = grade("jit_with_shard_map")
    only_loses(result, FSDP_JIT)
    part = result.part(FSDP_JIT)
    assert all(c.values_ok and [p.rule for p in c.problems] == ["S001"] for c in part.cases)
    assert part.score == POINTS[FSDP_JIT] / 2
    assert "S001 fsdp_train_step_jit must use jax.jit only, but the program contains a shard_map" in part.output


# --- red team: honest variety and attacks (the attacker's and the JAX reviewer's pass) ----------

@pytest.mark.parametrize("name", ["vjp_inside_shard_map", "unchecked_vma", "spelled_by_hand", "overlap_elsewhere",
                                  "unrolled_ring_hides_da_products", "losses_inside_shard_map"])
def test_honest_variety_earns_full_marks(grade, name):
    """Autodiff inside shard_map (check_vma on and off, jax.vjp or jax.value_and_grad of an inner
    product with dOut) and outside it, dA's ring the other way, dW
    by an einsum of the gathered row, an explicit psum_scatter, the two weights gathered by one call,
    a rematerialized jit step, the jit step by with_sharding_constraint only, the loss as a pmean of
    local means, the weights gathered by a device_put before shard_map, and dA's product made before
    its ring where another product hides every permute (W005 measures overlap): full marks."""
    assert scores(grade(name)) == POINTS, grade(name).to_text()


def test_red_team_gathering_the_batch_instead_of_the_weights(grade):
    """x and y gathered over X, the activations reduce-scattered and gathered back (no all-reduce,
    right values): C016 names the gathers of values that are not the stored weights."""
    result = grade("fsdp_gathers_the_batch")
    only_loses(result, FSDP)
    part = result.part(FSDP)
    assert all(c.values_ok for c in part.cases)
    assert part.score == pytest.approx(POINTS[FSDP] * (1 + 1 / 6) / 2, abs=0.01)   # only 1x8 is right
    assert re.search(r"C016 all-gather over X of a value that is not a stored W1 or W2: all-gather over X of "
                     r"f32\[4,16\]", part.output)


@pytest.mark.arithmetic
def test_hard_coded_learning_rate(grade):
    """lr = 1.0 written in (the visible case's) in both FSDP steps: right on the visible case only."""
    result = grade("hardcoded_lr")
    assert scores(result)[GRADS] == POINTS[GRADS]
    for name in (FSDP, FSDP_JIT):
        part = result.part(name)
        assert [c.case.mesh for c in part.cases if c.values_ok] == [(2, 4)], part.output
        assert "V005 W1: values wrong" in part.output


def test_wrong_direction_and_bfloat16_gathers_lose_values_only(grade):
    """dA's partial sums sent the other way than the block schedule assumes: values off on the rings
    of 3, 4 and 8 (on 2 both ways are one), communication right everywhere. Weights gathered in
    bfloat16: the step's values outside float32's tolerance on every case."""
    result = grade("wrong_direction_and_bf16")
    assert scores(result)[FSDP_JIT] == POINTS[FSDP_JIT]
    grads = result.part(GRADS)
    assert {c.case.mesh for c in grads.cases if not c.values_ok} == {(2, 4), (1, 8), (1, 3)}, grads.output
    assert all(c.rule_ok for c in grads.cases)
    assert "V005 dA: values wrong" in grads.output and "V005 dW" not in grads.output
    # the ring's directions named (H002), read from the tuple's dA
    assert re.search(r"H002 .*collective-permutes over Y go [+-]1", grads.output), grads.output
    fsdp = result.part(FSDP)
    assert fsdp.score == 0 and not any(c.values_ok for c in fsdp.cases)


def test_pmean_of_the_loss_without_check_vma_over_counts(grade):
    """The loss as a pmean of local means with check_vma=False: the pmean's psum transposes into
    another psum, the step is nX times too long, and the hint names check_vma."""
    result = grade("pmean_loss_unchecked")
    only_loses(result, FSDP)
    part = result.part(FSDP)
    assert [c.values_ok for c in part.cases].count(True) == 1                      # 1x8: nX = 1
    assert part.score == pytest.approx(POINTS[FSDP] / 6, abs=0.01)
    assert "H001 The step is nX times too long" in part.output and "check_vma=False" in part.output


# --- the contract ------------------------------------------------------------------------------

def test_hidden_fsdp_inputs_keep_gelu_in_its_curved_region():
    """Are gelu's inputs (x @ W1) of order one on every hidden case, and is every step large
    enough that one nX times too long is far off?"""
    from graders.hidden import hidden_cases, hidden_inputs

    part = TRAINING.part(FSDP)
    for case in hidden_cases(TRAINING)[FSDP]:
        W1, W2, x, y = hidden_inputs(TRAINING, part, case, 7)
        h = x.astype(float) @ W1
        assert np.mean(np.abs(h) <= 3) > 0.95 and np.mean(h < -0.5) > 0.1, case.label
        new1, _ = part.reference(W1.astype(float), W2.astype(float), x.astype(float), y.astype(float),
                                 mesh=case.mesh, **case.statics)
        assert np.abs(new1 - W1).max() > 1e-3 * np.abs(W1).max(), case.label


def test_hidden_cases_break_hard_coded_sizes():
    """Do the hidden cases cover rings of 1, 2, 3, 4 and 8 over Y and FSDP axes of 1, 2, 3, 4 and 8,
    with F never equal to D?"""
    from graders.hidden import hidden_cases

    cases = hidden_cases(TRAINING)
    assert {c.mesh[1] for c in cases[GRADS]} == {1, 2, 3, 4, 8}
    assert {c.mesh[0] for c in cases[FSDP]} == {1, 2, 3, 4, 8}
    assert all(c.sizes["F"] != c.sizes["D"] for c in cases[GRADS])


def test_every_corpus_file_is_tested():
    """Is every submission in tests/submissions/training graded above?"""
    tested = {"vjp_of_the_ring", "gather_a_for_dw", "unrolled_forward_rings", "add_then_send", "plain_jit_grads",
              "psum_over_y", "gather_dout", "hardcoded_ny", "products_before_the_ring", "ring_and_gather_of_a",
              "fsdp_checkpointed", "data_parallel_all_reduce", "local_mean_over_count",
              "scatter_then_gather_gradients", "replicated_weights", "jit_unconstrained", "jit_with_shard_map",
              "replicated_in_specs_pmean", "hardcoded_batch", "vjp_inside_shard_map", "unchecked_vma",
              "spelled_by_hand", "overlap_elsewhere", "unrolled_ring_hides_da_products", "losses_inside_shard_map",
              "fsdp_gathers_the_batch", "hardcoded_lr", "wrong_direction_and_bf16", "pmean_loss_unchecked"}
    assert {f[:-3] for f in os.listdir(CORPUS) if f.endswith(".py")} == tested
