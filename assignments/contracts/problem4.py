"""Assignment problem4: bidirectional collective matmuls.

The book's Problem 4 (How To Scale Your Model, Part 10): the collective matmuls of
problem3 pass data one way around the ring, so on a torus, where every link carries
traffic both ways at once, half of each link idles. Sending half of each chunk each way
halves the time of every step.
"""
from __future__ import annotations

from ..contract import Arg, Assignment, Case, Part, WrittenPart
from ..rules import (AllOf, BalancedDirections, RingDirections, BothDirections, Exactly, Forbid, HalfBlocks, MaxTotalBytes,
                     NeighbourSteps, OnlyKinds)
from .problem3 import (BOOK, F32, NOTHING_CROSSES_X, ONE_STEP, T, W2, W_COLS, W_ROWS, _block, in_the_ring, jit_matmul,
                       matmul, scaled_inputs)

VISIBLE = Case(mesh=(2, 4), sizes={"B": 8, "D": 12, "F": 20})
"""Odd blocks on a ring of 4 (D/nY = 3, F/nY = 5): halves one column apart, where a design that
assumes even blocks loses a column or pads one; the second mesh (4x2) has even ones."""
A = Arg("A", ("B", "D"), ("X", "Y"))  # the same as problem3's


def _rows(s):
    return s["B"] // s["nX"]


def bidirectional(count, cols, total_bytes=None, count_text="", one_step=True) -> AllOf:
    """Permutes only, over Y to a neighbour, both ways round the ring with the same bytes each way at every step,
    `count` of them (when given), each carrying half a [B/nX, cols] block, and (when given) no
    more bytes than the one-way version."""
    rules = [OnlyKinds(("collective-permute",)), Forbid("collective-permute", axes=("X",), why=NOTHING_CROSSES_X),
             NeighbourSteps("Y"), BothDirections("Y"), BalancedDirections("Y", _rows, cols),
             HalfBlocks("Y", _rows, cols)]
    if count is not None:
        rules.append(Exactly("collective-permute", count, axes=("Y",), what=count_text))
    if total_bytes is not None:
        rules.append(MaxTotalBytes(total_bytes, what="the one-way version's bytes: the halves of an odd block "
                                                     "are one column apart, and padding both to the wider "
                                                     "one sends more"))
    if one_step:
        rules += [ONE_STEP, in_the_ring()]
    return AllOf(tuple(rules))


ASSIGNMENT = Assignment(
    name="problem4",
    title="Problem 4: bidirectional collective matmuls",
    book_url="https://jax-ml.github.io/scaling-book/jax-stuff/",
    parts=(
        Part(
            name="allreduce_matmul_bidirectional", points=5,
            task="A[B_X, D_Y] @ W[D_Y, F] -> Out[B_X, F] with the reduction as rings of "
                 "collective-permutes going both ways.",
            args=(A, W_ROWS), result=Arg("out", ("B", "F"), ("X", None)), inputs=scaled_inputs(A, W_ROWS),
            rules=(bidirectional(
                lambda s: 4 * (s["nY"] - 1), lambda s: s["F"] // s["nY"],
                total_bytes=lambda s: 2 * (s["nY"] - 1) * _rows(s) * (s["F"] // s["nY"]) * F32,
                count_text="4(nY-1): a reduce-scatter ring and an all-gather ring, each way"), RingDirections()),
            reference=matmul, visible_case=VISIBLE, baseline=jit_matmul("X", None), cost_case=BOOK,
        ),
        Part(
            name="reducescatter_matmul_bidirectional", points=4,
            task="T[B_X, F_Y] @ W2[F_Y, D] -> Out[B_X, D_Y], half of each partial result "
                 "travelling each way around the ring.",
            args=(T, W2), inputs=scaled_inputs(T, W2),
            result=Arg("out", ("B", "D"), ("X", "Y")),
            rules=(bidirectional(
                lambda s: 2 * (s["nY"] - 1), lambda s: s["D"] // s["nY"],
                total_bytes=lambda s: (s["nY"] - 1) * _block(s) * F32,
                count_text="2(nY-1), nY-1 each way"), RingDirections()),
            reference=matmul, visible_case=VISIBLE, baseline=jit_matmul("X", "Y"), cost_case=BOOK,
        ),
        Part(
            name="allgather_matmul_bidirectional", points=2,
            task="A[B_X, D_Y] @ W[D, F_Y] -> Out[B_X, F_Y], half of each block of A "
                 "travelling each way around the ring.",
            args=(A, W_COLS), result=Arg("out", ("B", "F"), ("X", "Y")), inputs=scaled_inputs(A, W_COLS),
            rules=(bidirectional(
                None, lambda s: s["D"] // s["nY"],
                total_bytes=lambda s: (s["nY"] - 1) * _block(s) * F32), RingDirections()),
            reference=matmul, visible_case=VISIBLE, baseline=jit_matmul("X", "Y"), cost_case=BOOK,
        ),
    ),
    written=(
        WrittenPart("written_bidirectional", 2,
                    "How much faster are the bidirectional versions, by the cost model on TPU v5e "
                    "and v5p, and why?"),
    ),
)
