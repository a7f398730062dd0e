"""Assignment problem2: a mixture-of-experts layer, on one device, then sharded three ways.

The book's Problem 2 (How To Scale Your Model, Part 10, "Worked Problems",
https://jax-ml.github.io/scaling-book/jax-stuff/): ``Out[i] = A[i] @ W[B[i]]`` where
``B[i]`` names the expert (one of E matrices) that token i goes to; then top-k routing,
``Out[i] = mean_j A[i] @ W[B[i, j]]``. The rules are about memory as much as about
communication: no version may build the dense ``W[B]`` gather (an [S, D, F] value), and the
all-to-all versions may not hold anything as large as the global activations on one device.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..contract import Arg, Assignment, Case, Part, WrittenPart
from ..rules import AllOf, AnyCommunication, Forbid, NoValueAtLeast, OnlyWhen, _observed

F32 = 4

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

# The book's latest text (Problem 2, "Worked Problems"): W[E_X, D, F] and A[S_X, D], so every
# device holds whole rows of its tokens and whole matrices of its experts.
W_X = Arg("W", ("E", "D", "F"), ("X", None, None))
A_X = Arg("A", ("S", "D"), ("X", None))
OUT_X = Arg("out", ("S", "F"), ("X", None))

VISIBLE_LOCAL = Case(mesh=(1, 1), sizes={"S": 16, "D": 8, "F": 12, "E": 4})
VISIBLE = Case(mesh=(2, 4), sizes={"S": 32, "D": 8, "F": 24, "E": 4})
# The latest-sharding parts hold whole F on each device: smaller F keeps a device's experts
# and one round's products below the global [S, D] activations.
VISIBLE_X = Case(mesh=(2, 4), sizes={"S": 32, "D": 8, "F": 12, "E": 4})
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

# One fault, one message: gathered tokens (floats) and gathered ids or masks (integers) are
# told apart, since only the first is "tokens gathered everywhere".
NO_GATHER_OVER_X = AllOf((
    Forbid("all-gather", axes=("X",), dtypes=("f", "bf"),
           why="Tokens should travel only to the devices that own their experts "
               "(jax.lax.all_to_all over X), not be gathered everywhere."),
    Forbid("all-gather", axes=("X",), dtypes=("s", "u", "pred"),
           why="That gathers integer routing data (expert ids or a mask) to every row; send "
               "each token's expert id with the token, in an all_to_all of its own.")),
    text="no all-gather over X")

BYTES_FACTOR = 2
"""How many times the bytes of a perfectly routed all-to-all the tokens may cost (the rounding
of fixed-size chunks costs up to about this much; sending every token to every row, nX times)."""


@dataclasses.dataclass(frozen=True)
class TokensByAllToAll:
    """On meshes with nX >= 2: the tokens travel by all-to-all over X (an all-reduce or an
    all-gather that broadcasts them does not count), and the collectives over X move at most
    `BYTES_FACTOR` times what an all-to-all routing each token only to its expert's row needs
    on the case's routing (read from the case's B).

    That need, per device: a fixed-size all-to-all sends one block to every row (its own
    included) per round, so over a run every block must hold the most (token, expert) pairs
    one row sends to one row, m; each pair carries its token there (D floats) and its result
    back (`result` floats: a device's share of F)."""

    result: Callable[[dict], int]

    def describe(self) -> str:
        return (f"tokens travel by all-to-all over X, moving at most {BYTES_FACTOR}x the bytes that "
                f"routing each token only to its expert's row needs")

    def need(self, case, B) -> tuple[int, int]:
        """(m, bytes per device) of a perfectly routed all-to-all for routing B."""
        s = case.all_sizes
        nX = s["nX"]
        B = np.asarray(B).reshape(s["S"], -1)
        row = np.repeat(np.arange(s["S"]) // (s["S"] // nX), B.shape[1])
        pairs = np.zeros((nX, nX), int)
        np.add.at(pairs, (row, B.reshape(-1) // (s["E"] // nX)), 1)
        m = int(pairs.max())
        return m, nX * m * (s["D"] + self.result(s)) * F32

    def violations(self, analysis, case, inputs=()) -> list[str]:
        s = case.all_sizes
        if s["nX"] < 2:
            return []
        over_x = [c for c in analysis.collectives if "X" in c.axes]
        if not any(c.kind == "all-to-all" and c.operands[0].dtype.startswith(("f", "bf"))
                   for c in over_x if c.operands):
            return [f"no all-to-all over X moves the tokens (observed over X: {_observed(over_x)}); "
                    f"allowed: tokens travel to the rows that own their experts with "
                    f"jax.lax.all_to_all over X. An all-reduce or all-gather that broadcasts them "
                    f"to every row does not count: every row then receives every token"]
        if any(c.count is None for c in over_x):
            return [f"cannot count the bytes moved over X: a collective runs an unknown number of "
                    f"times (observed: {_observed(over_x)})"]
        if len(inputs) < 3:  # called without the case's inputs: the routing is unknown
            return []
        m, need = self.need(case, inputs[2])
        moved = sum(c.bytes * c.count for c in over_x)
        if moved <= BYTES_FACTOR * need:
            return []
        return [f"moves {moved:,} bytes per device over X; allowed: at most {BYTES_FACTOR}x the "
                f"{need:,} that an all-to-all routing each token only to its expert's row needs "
                f"on this routing (nX={s['nX']} blocks per round, {m} (token, expert) pairs for "
                f"the busiest pair of rows, each carrying D={s['D']} floats there and "
                f"{self.result(s)} back). Send each token only to the row that owns its expert, "
                f"and stop when the busiest pair of rows is done. Observed: {_observed(over_x)}"]

NO_DENSE_GATHER_X = NoValueAtLeast(
    lambda s: s["S"] * s["D"] * s["F"] // s["nX"],
    "the dense gather of a device's own tokens, S*D*F/nX elements",
    why="That is W[B] for your S/nX tokens: one D x F matrix per token. Group the tokens by "
        "expert (a jax.lax.scan over your experts, jax.lax.ragged_dot, or the padded buffer of "
        "exercise 2a) and multiply each group by its expert's matrix once.")

ROUTED_X = AllOf(
    (TokensByAllToAll(result=lambda s: s["F"]), NO_GATHER_OVER_X, NO_DENSE_GATHER_X, NOT_ALL_ACTIVATIONS),
    text=f"on meshes with nX >= 2, at least one all-to-all over X moves the tokens, and the bytes "
         f"moved over X are at most {BYTES_FACTOR}x what routing each token only to its expert's "
         f"row needs on the case's routing; no all-gather over X; no value as large as the dense gather of a device's own tokens "
         "(S*D*F/nX elements); on meshes with nX >= 2, no value per device as large as the "
         "global [S, D] activations")

ROUTED = AllOf(
    (TokensByAllToAll(result=lambda s: s["F"] // s["nY"]), NO_GATHER_OVER_X, NO_DENSE_GATHER,
     NOT_ALL_ACTIVATIONS),
    text=f"on meshes with nX >= 2, at least one all-to-all over X moves the tokens, and the bytes "
         f"moved over X are at most {BYTES_FACTOR}x what routing each token only to its expert's "
         f"row needs on the case's routing; no all-gather over X; no [S, D, F] value; on meshes with nX >= 2, no value per device "
         "as large as the global [S, D] activations")


ASSIGNMENT = Assignment(
    name="problem2",
    title="Problem 2: mixture-of-experts routing",
    book_url="https://jax-ml.github.io/scaling-book/jax-stuff/",
    parts=(
        Part(
            name="moe_local", points=3,
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
            name="moe_all_to_all", points=8,
            task="shard_map; each token travels only to the row of devices that owns its expert, "
                 "with jax.lax.all_to_all over X in a jax.lax.while_loop over fixed-size chunks; "
                 "right for any routing.",
            args=(W, A, B), result=OUT, rule=ROUTED, reference=moe,
            visible_case=VISIBLE, style="shard_map",
        ),
        Part(
            name="moe_topk", points=1,
            task="Top-k routing, B int32[S, k]: Out[i] = mean over j of A[i] @ W[B[i, j]], built on "
                 "the all-to-all version.",
            args=(W, A, B_TOPK), result=OUT, rule=ROUTED, reference=moe,
            visible_case=VISIBLE_TOPK, style="shard_map",
        ),
        Part(
            name="moe_allgather_x", points=1,
            task="The book's latest shardings, W[E_X, D, F] and A[S_X, D], result P('X', None): "
                 "shard_map with an all_gather of the tokens over X; any local grouping (padded "
                 "buffer, jax.lax.scan over experts, jax.lax.ragged_dot).",
            args=(W_X, A_X, B), result=OUT_X, rule=NO_DENSE_GATHER_X, reference=moe,
            visible_case=VISIBLE_X, style="shard_map",
        ),
        Part(
            name="moe_all_to_all_x", points=2,
            task="The book's latest shardings, result P('X', None): each token travels only to "
                 "the row of devices that owns its expert, with jax.lax.all_to_all over X in a "
                 "jax.lax.while_loop over fixed-size chunks; right for any routing.",
            args=(W_X, A_X, B), result=OUT_X, rule=ROUTED_X, reference=moe,
            visible_case=VISIBLE_X, style="shard_map",
        ),
    ),
    written=(
        WrittenPart(
            "written_jit_communication", 2,
            "What did jax.jit insert to run your local algorithm on sharded inputs, and what does "
            "it cost?"),
        WrittenPart(
            "written_slots", 1,
            "Why does each expert's row of the [E, S, D] buffer need S slots, and what goes "
            "wrong with fewer?"),
        WrittenPart(
            "written_speed_moe", 2,
            "How much faster than the all-gather version does the cost model say the all-to-all "
            "version is on a TPU v5e, and why; how does skew change it?"),
    ),
)
