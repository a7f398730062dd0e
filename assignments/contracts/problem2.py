"""Assignment problem2: a mixture-of-experts layer, on one device, then sharded three ways.

The book's Problem 2 (How To Scale Your Model, Part 10, "Worked Problems",
https://jax-ml.github.io/scaling-book/jax-stuff/): ``Out[i] = A[i] @ W[B[i]]`` where
``B[i]`` names the expert (one of E matrices) that token i goes to; then top-k routing,
``Out[i] = mean_j A[i] @ W[B[i, j]]``. The rules are about memory as much as about
communication: no version may build the dense ``W[B]`` gather (an [S, D, F] value), and the
all-to-all versions may not hold anything as large as the global activations on one device.
"""
from __future__ import annotations

import numpy as np

from ..contract import Arg, Assignment, Case, Part, WrittenPart
from ..rules import AllOf, AnyCommunication, Forbid, NoValueAtLeast, OnlyWhen

W = Arg("W", ("E", "D", "F"), ("X", None, "Y"))
A = Arg("A", ("S", "D"), ("X", "Y"))
B = Arg("B", ("S",), ("X",), dtype="int32", high="E")
B_TOPK = Arg("B", ("S", "k"), ("X", None), dtype="int32", high="E")
OUT = Arg("out", ("S", "F"), ("X", "Y"))

# moe_local runs on one device: a 1x1 mesh, every argument whole.
W_ONE = Arg("W", ("E", "D", "F"), (None, None, None))
A_ONE = Arg("A", ("S", "D"), (None, None))
B_ONE = Arg("B", ("S",), (None,), dtype="int32", high="E")
OUT_ONE = Arg("out", ("S", "F"), (None, None))

VISIBLE_LOCAL = Case(mesh=(1, 1), sizes={"S": 16, "D": 8, "F": 12, "E": 4})
VISIBLE = Case(mesh=(2, 4), sizes={"S": 32, "D": 8, "F": 24, "E": 4})
VISIBLE_TOPK = Case(mesh=(2, 4), sizes={"S": 32, "D": 8, "F": 24, "E": 4, "k": 2})


def moe(W, A, B, *, mesh=None):
    """Out[i] = mean over j of A[i] @ W[B[i, j]] (B of shape [S] means k = 1), float64."""
    B = np.asarray(B).astype(np.int64)
    if B.ndim == 1:
        B = B[:, None]
    out = np.zeros((A.shape[0], W.shape[2]))
    for j in range(B.shape[1]):
        for e in range(W.shape[0]):
            rows = B[:, j] == e
            out[rows] += A[rows] @ W[e]
    return out / B.shape[1]


def _dense_share(s):
    """Elements of one device's share of an [S, D, F] array."""
    return s["S"] * s["D"] * s["F"] // (s["nX"] * s["nY"])


NO_DENSE_GATHER = NoValueAtLeast(
    _dense_share, "a device's share of an [S, D, F] array, S*D*F/(nX*nY) elements",
    why="That is the dense W[B] gather: one D x F matrix per token. Group the tokens by "
        "expert instead and multiply each group by its expert's matrix once.")

NOT_ALL_ACTIVATIONS = OnlyWhen(
    lambda s: s["nX"] >= 2,
    NoValueAtLeast(
        lambda s: s["S"] * s["D"], "the global [S, D] activations, S*D elements",
        why="Send tokens in fixed-size chunks, round after round (jax.lax.all_to_all inside "
            "jax.lax.while_loop), so no buffer holds all tokens (an [E, S, D] buffer, or one "
            "padded round sized for every local token)."),
    "on meshes with nX >= 2")

NO_GATHER_OVER_X = Forbid(
    "all-gather", axes=("X",),
    why="Tokens should travel only to the devices that own their experts (jax.lax.all_to_all "
        "over X), not be gathered everywhere.")

ROUTED = AllOf(
    (NO_GATHER_OVER_X, NO_DENSE_GATHER, NOT_ALL_ACTIVATIONS),
    text="no all-gather over X; no [S, D, F] value; on meshes with nX >= 2, no value per device "
         "as large as the global [S, D] activations")


ASSIGNMENT = Assignment(
    name="problem2",
    title="Problem 2: mixture-of-experts routing",
    book_url="https://jax-ml.github.io/scaling-book/jax-stuff/",
    parts=(
        Part(
            name="moe_local", points=2,
            task="Out[i] = A[i] @ W[B[i]] on one device (no mesh), never building an [S, D, F] value.",
            args=(W_ONE, A_ONE, B_ONE), result=OUT_ONE, rule=NO_DENSE_GATHER, reference=moe,
            visible_case=VISIBLE_LOCAL, takes_mesh=False,
        ),
        Part(
            name="moe_jit", points=1,
            task="The same values on sharded inputs: jax.jit of a local algorithm, result P('X', 'Y').",
            args=(W, A, B), result=OUT, rule=AnyCommunication(), reference=moe,
            visible_case=VISIBLE, style="jit",
        ),
        Part(
            name="moe_allgather", points=2,
            task="shard_map with an explicit all_gather of the tokens and a local reorder.",
            args=(W, A, B), result=OUT, rule=NO_DENSE_GATHER, reference=moe,
            visible_case=VISIBLE, style="shard_map",
        ),
        Part(
            name="moe_all_to_all", points=4,
            task="shard_map; tokens travel to their experts' devices with jax.lax.all_to_all in a "
                 "jax.lax.while_loop over fixed-size chunks; right for any routing.",
            args=(W, A, B), result=OUT, rule=ROUTED, reference=moe,
            visible_case=VISIBLE, style="shard_map",
        ),
        Part(
            name="moe_topk", points=3,
            task="Top-k routing, B int32[S, k]: Out[i] = mean over j of A[i] @ W[B[i, j]], built on "
                 "the all-to-all version.",
            args=(W, A, B_TOPK), result=OUT, rule=ROUTED, reference=moe,
            visible_case=VISIBLE_TOPK, style="shard_map",
        ),
    ),
    written=(
        WrittenPart(
            "written_jit_communication", 2,
            "What did jax.jit insert to run your local algorithm on sharded inputs, and what does "
            "it cost?"),
    ),
)
