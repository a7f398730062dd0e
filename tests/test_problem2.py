"""problem2 (mixture-of-experts routing): the contract, the hidden routings, and the graders
against a corpus of broken submissions.

Each file in `tests/submissions/problem2/` is the reference solution with ONE function
broken; each is graded only on the functions it is about (`only=`), once per module.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from grading import cached_grader

from assignments.contract import Case
from assignments.contracts import get_assignment
from assignments.export_worker import signature_problem
from assignments.contracts.problem2 import BYTES_FACTOR, TokensByAllToAll
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis, Value
from assignments.rules import NoValueAtLeast, OnlyWhen
from graders import Limits
from graders.hidden import hidden_cases, hidden_inputs

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO_ROOT, "tests", "submissions", "problem2")
SOLUTION_NB = os.path.join(REPO_ROOT, "solutions", "problem2", "problem2.ipynb")
RELEASE_NB = os.path.join(REPO_ROOT, "release", "problem2", "problem2.ipynb")
ASSIGNMENT = get_assignment("problem2")
POINTS = {"moe_local": 3, "moe_jit": 1, "moe_allgather": 2, "moe_all_to_all": 8, "moe_topk": 1,
          "moe_allgather_x": 1, "moe_all_to_all_x": 2}
FAST = Limits(cell_timeout=20, case_timeout=20, stall_timeout=60)


@pytest.fixture(scope="module")
def grade():
    return cached_grader("problem2", CORPUS, FAST)


def cases_of(name: str) -> list[Case]:
    return hidden_cases(ASSIGNMENT)[name]


# --- the contract in code ------------------------------------------------------------------


def test_moe_local_takes_no_mesh():
    """Is moe_local's signature the contract's (no mesh), and do the others take `mesh`?"""
    assert ASSIGNMENT.part("moe_local").signature == "moe_local(W, A, B)"
    assert ASSIGNMENT.part("moe_topk").signature == "moe_topk(W, A, B, *, mesh)"
    assert all(c.mesh == (1, 1) for c in cases_of("moe_local"))


def test_signature_check_respects_takes_mesh():
    """Does the export worker accept moe_local(W, A, B) and reject one that needs a mesh?"""
    part = {"name": "moe_local", "num_args": 3, "statics": [], "takes_mesh": False,
            "signature": "moe_local(W, A, B)"}
    assert signature_problem(lambda W, A, B: None, part) is None
    problem = signature_problem(lambda W, A, B, *, mesh: None, part)
    assert problem and problem.startswith("wrong signature: expected moe_local(W, A, B)")
    with_mesh = dict(part, takes_mesh=True)
    assert signature_problem(lambda W, A, B, *, mesh: None, with_mesh) is None


def test_hidden_meshes_and_divisibility():
    """Do the hidden cases cover 2x4, 4x2, 1x8, 2x2 and a 3-device mesh, with E divisible by nX?"""
    for name in ("moe_jit", "moe_allgather", "moe_all_to_all", "moe_topk"):
        cases = cases_of(name)
        assert {c.mesh for c in cases} == {(2, 4), (4, 2), (1, 8), (2, 2), (3, 1)}
        for c in cases:
            s = c.all_sizes
            assert s["E"] % s["nX"] == 0 and s["S"] % s["nX"] == 0
            assert s["D"] % s["nY"] == 0 and s["F"] % s["nY"] == 0


def test_hidden_routings_are_adversarial():
    """Do the routings include uniform, all-to-one-expert, idle experts, and k up to E?"""
    seen = set()
    for name in ("moe_local", "moe_all_to_all", "moe_topk"):
        part = ASSIGNMENT.part(name)
        for case in cases_of(name):
            _, _, B = hidden_inputs(ASSIGNMENT, part, case, 1)
            s = case.all_sizes
            assert B.dtype == np.int32 and B.shape == ((s["S"],) if "k" not in s else (s["S"], s["k"]))
            used = len(np.unique(B))
            assert used <= s["experts_used"]
            if s["experts_used"] == 1:
                seen.add("one expert")
                assert used == 1
            elif s["experts_used"] < s["E"]:
                seen.add("skewed, idle experts")
            else:
                seen.add("uniform")
                # Even: within each row of devices, every expert gets its share, give or take one.
                for row in B.reshape(s["nX"], -1):
                    counts = np.bincount(row, minlength=s["E"])
                    assert counts.max() - counts.min() <= 1, (case.label, counts)
            if s.get("k") == s["E"]:
                seen.add("k = E")
                assert all(sorted(row) == list(range(s["E"])) for row in B)
    assert seen == {"one expert", "skewed, idle experts", "uniform", "k = E"}


def test_activation_rule_applies_only_when_x_is_split():
    """Does the [S, D] rule stay silent on nX = 1 meshes and name the value and the condition otherwise?"""
    rule = OnlyWhen(lambda s: s["nX"] >= 2, NoValueAtLeast(lambda s: s["S"] * s["D"], "all [S, D]"),
                    "on meshes with nX >= 2")
    big = ProgramAnalysis(collectives=(), largest_values=(Value("buf", ArrayShape("f32", (2, 16, 8)), "fusion"),),
                          temp_bytes=None, num_devices=8)
    assert rule.violations(big, Case((1, 8), {"S": 32, "D": 8})) == []
    [message] = rule.violations(big, Case((2, 4), {"S": 32, "D": 8}))
    assert re.search(r"the program computes buf = f32\[2,16,8\] \(256 elements\); allowed: no value "
                     r"with 256 or more elements \(all \[S, D\]\)\.? \(this rule applies on meshes "
                     r"with nX >= 2\)", message)
    assert rule.describe() == "no value as large as all [S, D] (on meshes with nX >= 2)"


# --- right answers and the untouched stub -------------------------------------------------


def test_solution_gets_full_marks_on_every_mesh(grade):
    """Does the solutions notebook get every point, on every mesh and every routing?"""
    result = grade(SOLUTION_NB)
    assert result.problems == []
    assert result.score == result.max_score == sum(POINTS.values())
    for part in result.parts:
        assert part.passed, part.output
        assert all(c.values_ok and c.rule_ok and not c.problems for c in part.cases)


def test_release_stub_gets_zero(grade):
    """Does the released notebook, untouched, get 0 with every part saying "not implemented"?"""
    result = grade(RELEASE_NB)
    assert result.score == 0
    for part in result.parts:
        assert re.search(r"not implemented \(the function raises NotImplementedError\)", part.output)


# --- the corpus ------------------------------------------------------------------------------


def test_dense_gather_loses_the_memory_half(grade):
    """Does the W[B] gather keep moe_local's values half, lose the rule half, and name the [S, D, F] value?"""
    result = grade("dense_gather", only=["moe_local", "moe_jit"])
    local, jit = result.part("moe_local"), result.part("moe_jit")
    assert local.score == pytest.approx(POINTS["moe_local"] / 2)
    assert all(c.values_ok and not c.rule_ok for c in local.cases)
    for c in local.cases:
        s = c.case.sizes
        assert re.search(rf"the program computes \S+ = f32\[{s['S']},{s['D']},{s['F']}\] .*allowed: no value "
                         rf"with {s['S'] * s['D'] * s['F']:,} or more elements \(a device's share of an "
                         rf"\[S, D, F\] array.*dense W\[B\] gather", "; ".join(c.problems))
    assert jit.score == jit.max_score  # moe_jit's rule checks nothing


def test_all_gather_over_x_in_the_loop_loses_the_rule_half(grade):
    """Does an all-gather over X inside the while_loop lose the rule half on every nX >= 2 mesh,
    with a message that copes with the unknown trip count?"""
    result = grade("allgather_in_loop", only=["moe_all_to_all"])
    part = result.part("moe_all_to_all")
    for c in part.cases:
        assert c.values_ok
        assert c.rule_ok == (c.case.mesh[0] == 1), c.problems
    broken = [c for c in part.cases if not c.rule_ok]
    assert part.score == pytest.approx(round(POINTS["moe_all_to_all"] * (len(part.cases) - len(broken) / 2) / len(part.cases), 2))
    # The loop's trip count depends on the routing: counted when run. Integer ids are not
    # "tokens gathered everywhere".
    assert re.search(r"communication observed: all-gather over X of s32\[[\d,]+\] \(\d+ bytes\) x\d+; "
                     r"allowed: no all-gather over X\. That gathers integer routing data", part.output)
    assert "gathered everywhere" not in part.output


def _overflows(case: Case, seed: int) -> bool:
    """Does some pair of device rows exchange more tokens than the fixed capacity?"""
    s = case.all_sizes
    part = ASSIGNMENT.part("moe_all_to_all")
    _, _, B = hidden_inputs(ASSIGNMENT, part, case, seed)
    tokens, nX = s["S"] // s["nX"], s["nX"]
    chunk = max(1, tokens // 4)
    capacity = chunk * -(-3 * tokens // (2 * nX * chunk))  # whole rounds of `chunk` pairs
    counts = [np.bincount(row // (s["E"] // nX), minlength=nX) for row in B.reshape(nX, tokens)]
    return int(np.max(counts)) > capacity


def test_fixed_capacity_drops_tokens_when_an_expert_is_overloaded(grade):
    """Does an all-to-all with a fixed number of rounds (a capacity) fail exactly the cases that
    overload a device (every token to one expert among them), on values and nothing else?"""
    from graders.hidden import case_seed

    result = grade("fixed_capacity", only=["moe_all_to_all"])
    part = result.part("moe_all_to_all")
    for index, c in enumerate(part.cases):
        dropped = _overflows(c.case, case_seed(ASSIGNMENT.name, "moe_all_to_all", index))
        assert c.values_ok == (not dropped), (c.case.label, c.problems)
        assert c.rule_ok, c.problems
        if c.case.sizes["experts_used"] == 1 and c.case.mesh[0] > 1:
            assert dropped
    failing = [c for c in part.cases if not c.values_ok]
    assert failing and re.search(r"values wrong: \d+ of \d+ elements differ", part.output)
    assert part.score < part.max_score


def test_one_round_for_all_tokens_breaks_the_activation_rule(grade):
    """Does a single round sized for every local token keep the values and lose the rule on nX >= 2?"""
    result = grade("one_big_round", only=["moe_all_to_all"])
    part = result.part("moe_all_to_all")
    for c in part.cases:
        assert c.values_ok
        assert c.rule_ok == (c.case.mesh[0] == 1), c.problems
    assert re.search(r"allowed: no value with [\d,]+ or more elements \(the global \[S, D\] activations, "
                     r"S\*D elements\)\. Send tokens in fixed-size chunks.* \(this rule applies on meshes "
                     r"with nX >= 2\)", part.output)


def test_topk_that_sums_fails_every_k_above_one(grade):
    """Does summing the k outputs lose exactly the cases with k > 1, on values?"""
    result = grade("topk_sum", only=["moe_topk"])
    part = result.part("moe_topk")
    for c in part.cases:
        assert c.values_ok == (c.case.sizes["k"] == 1), (c.case.label, c.problems)
    ones = sum(c.case.sizes["k"] == 1 for c in part.cases)
    assert ones >= 1
    assert part.score == pytest.approx(round(POINTS["moe_topk"] * ones / len(part.cases), 2))
    assert re.search(r"values wrong", part.output)


def test_latest_shardings_dense_gather_loses_half_and_scan_or_ragged_dot_pass(grade):
    """With the book's latest shardings (W[E_X, D, F], A[S_X, D]), does the dense W[B] gather in
    moe_allgather_x keep the values half and lose the memory half on every case, while
    jax.lax.ragged_dot (moe_local) and a jax.lax.scan over experts (moe_all_to_all_x) get
    full marks?"""
    result = grade("dense_gather_x", only=["moe_local", "moe_allgather_x", "moe_all_to_all_x"])
    dense = result.part("moe_allgather_x")
    assert dense.score == pytest.approx(POINTS["moe_allgather_x"] / 2)
    assert all(c.values_ok and not c.rule_ok for c in dense.cases)
    for c in dense.cases:
        s = c.case.all_sizes
        assert re.search(rf"f32\[{s['S']},{s['D']},{s['F']}\] .*allowed: no value with "
                         rf"{s['S'] * s['D'] * s['F'] // s['nX']:,} or more elements \(the dense gather "
                         rf"of a device's own tokens", "; ".join(c.problems))
    for name in ("moe_local", "moe_all_to_all_x"):
        part = result.part(name)
        assert part.score == part.max_score == POINTS[name], part.output


def test_latest_shardings_are_the_books():
    """Do the latest-sharding parts take W at P('X', None, None) and A at P('X', None), and
    return P('X', None)?"""
    for name in ("moe_allgather_x", "moe_all_to_all_x"):
        part = ASSIGNMENT.part(name)
        assert [a.spec for a in part.args] == [("X", None, None), ("X", None), ("X",)]
        assert part.result.spec == ("X", None)
        assert part.signature == f"{name}(W, A, B, *, mesh)"


def test_byte_bound_reads_the_routing():
    """Is the all-to-all's need computed from the case's routing (the busiest pair of rows,
    times nX blocks, times a token there and its result back), and does the rule state the
    factor, observed against allowed, on a hand-built analysis?"""
    rule = TokensByAllToAll(result=lambda s: s["F"] // s["nY"])
    case = Case((2, 4), {"S": 8, "D": 4, "F": 8, "E": 4})
    B = np.array([0, 0, 0, 2, 1, 1, 3, 3], np.int32)  # row 0 sends 3 to row 0, 1 to row 1
    m, need = rule.need(case, B)
    assert m == 3 and need == 2 * 3 * (4 + 2) * 4

    def all_to_all(count):
        return Collective("all-to-all", ("X",), (ArrayShape("f32", (2, 3, 6)),), (), count, 2)

    ok = ProgramAnalysis((all_to_all(2),), (), None, 8)
    assert rule.violations(ok, case, [None, None, B]) == []
    [message] = rule.violations(ProgramAnalysis((all_to_all(3),), (), None, 8), case, [None, None, B])
    assert re.search(rf"moves 432 bytes per device over X; allowed: at most {BYTES_FACTOR}x the 144 "
                     r"that an all-to-all routing each token only to its expert's row needs", message)
    reduce = Collective("all-reduce", ("X",), (ArrayShape("f32", (2, 3, 6)),), (), 1, 2)
    [message] = rule.violations(ProgramAnalysis((reduce,), (), None, 8), case, [None, None, B])
    assert message.startswith("no all-to-all over X moves the tokens (observed over X: all-reduce")
    assert rule.violations(ProgramAnalysis((reduce,), (), None, 8), Case((1, 8), case.sizes), [None, None, B]) == []


def test_every_token_to_every_row_moves_too_many_bytes(grade):
    """Does an all-to-all that sends every token to every row keep its values and lose the rule
    half on every evenly routed case with nX >= 2 (where it moves nX times what is needed), for
    moe_all_to_all and moe_topk, with the bound stated?"""
    result = grade("moe_all_to_all_every_row", only=["moe_all_to_all", "moe_topk"])
    for name in ("moe_all_to_all", "moe_topk"):
        part = result.part(name)
        assert all(c.values_ok for c in part.cases), part.output
        even = [c for c in part.cases if c.case.sizes["experts_used"] == c.case.sizes["E"]
                and c.case.mesh[0] > 1]
        assert even and all(not c.rule_ok for c in even), part.output
        assert all(c.rule_ok for c in part.cases if c.case.mesh[0] == 1)
        assert re.search(rf"moves [\d,]+ bytes per device over X; allowed: at most {BYTES_FACTOR}x the "
                         r"[\d,]+ that an all-to-all routing each token only to its expert's row needs "
                         r"on this routing \(nX=\d blocks per round, \d+ \(token, expert\) pairs", part.output)
        assert part.score < part.max_score


def test_all_reduce_broadcast_is_not_an_all_to_all(grade):
    """Does broadcasting each round's tokens with an all-reduce (no all-to-all) keep its values
    and lose the rule half on every case with nX >= 2, with one message saying so?"""
    part = grade("moe_allreduce_broadcast", only=["moe_all_to_all"]).part("moe_all_to_all")
    for c in part.cases:
        assert c.values_ok, c.problems
        assert c.rule_ok == (c.case.mesh[0] == 1), c.problems
        if not c.rule_ok:
            assert len(c.problems) == 1, c.problems
            assert re.search(r"no all-to-all over X moves the tokens \(observed over X: .*all-reduce over X "
                             r"of f32.*allowed: tokens travel to the rows that own their experts with "
                             r"jax.lax.all_to_all over X\. An all-reduce or all-gather that broadcasts them",
                             c.problems[0])


TESTED = {"moe_all_to_all_every_row", "moe_allreduce_broadcast", "dense_gather", "allgather_in_loop", "fixed_capacity", "one_big_round", "topk_sum",
          "dense_gather_x"}


def test_every_corpus_file_is_tested():
    """Is every submission in tests/submissions/problem2 graded by a test above?"""
    assert {n[:-3] for n in os.listdir(CORPUS) if n.endswith(".py")} == TESTED
