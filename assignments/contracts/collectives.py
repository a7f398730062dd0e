"""Assignment collectives: the collectives by hand, graded on what the program sends.

The book's Part 3, "Sharded Matrices and How to Multiply Them"
(https://jax-ml.github.io/scaling-book/sharding/), prices four collectives: all-gather,
reduce-scatter, all-reduce and all-to-all. Problems 3 and 4 build collective matmuls from rings
of `jax.lax.ppermute`; here students first build the collectives themselves from the same
permutes, one block per step, and price them with the book's formulas. Every part is written
in `jax.shard_map` and communicates by `jax.lax.ppermute` over Y alone: no built-in collective
may appear in the lowered program (`ByHand`), where a psum over a one-device axis still shows
though the compiler drops it.

"Each received block is added where it arrives" (the reduce-scatter) needs no rule of its own:
with nY-1 permutes of one block each, every one to a neighbour, a device's block can only be
complete if each device adds its own share before passing the sum on (the farthest share
travels nY-1 links); a ring that forwards the raw shares sends more, or jumps.
"""
from __future__ import annotations

import numpy as np

from ..contract import Arg, Assignment, Case, Part, WrittenPart
from ..rules import (AllOf, BalancedDirections, BothDirections, Exactly, Forbid, HalfBlocks, MaxTotalBytes,
                     NeighbourSteps, OnlyKinds, RingDirections)
from ..style_rules import ByHand, UsesShardMap, WritesCollective

F32 = 4
VISIBLE = Case(mesh=(2, 4), sizes={"B": 8, "D": 12})
"""A 2x4 mesh, blocks of [4, 3] (an odd number of columns, so that a bidirectional half is one
column off); the check's second mesh, 4x2, has [2, 6]."""
COST = Case(mesh=(1, 4), sizes={"B": 1024, "D": 4096})
"""Where each visible check prices the student's program beside jax.lax's own collective: a
4-chip line of TPU v5e (v5e wraps around only on a full 16-chip axis), blocks of 4 MB."""

A = Arg("A", ("B", "D"), ("X", "Y"))
PARTIALS = Arg("A", ("nY", "B", "D"), ("Y", "X", None))
"""Device (x, y) holds rows x of A[y]: one partial sum of the whole [B, D] result."""
ROWS = Arg("A", ("B", "D"), ("Y", None))
GATHERED = Arg("out", ("B", "D"), ("X", None))
SPLIT = Arg("out", ("B", "D"), ("X", "Y"))
COLUMNS = Arg("out", ("B", "D"), (None, "Y"))


def _rows(s):
    return s["B"] // s["nX"]


def _cols(s):
    return s["D"] // s["nY"]


def _block(s):
    """Elements of one [B/nX, D/nY] block: what one ring step moves."""
    return _rows(s) * _cols(s)


def _exchanged(s):
    """Elements of one [B/nY, D/nY] block: what one step of the direct all-to-all moves."""
    return (s["B"] // s["nY"]) * _cols(s)


OWN = "jax.lax's own collective"
"""What the cost table calls the baseline: the collective the part builds by hand, as jax.lax has it."""
NOTHING_CROSSES_X = ("Every row of devices runs its own ring over Y on its own rows of A; nothing needs to cross "
                     "X.")
PERMUTES_ONLY = ("Build it from jax.lax.ppermute steps: each device sends one block at a time to another, and "
                 "adds or places what arrives.")
BY_HAND = (UsesShardMap(), ByHand(), WritesCollective("collective_permute", over="Y"))
"""Written in a shard_map, with no jax.lax collective but ppermute, and the ppermutes written
there: a jnp.roll of the sharded array in jax.jit compiles to the same neighbour permutes, but
XLA built that ring, not the student."""


def ring(count, what: str) -> AllOf:
    """`count` collective-permutes over Y, each one [B/nX, D/nY] block, each to a neighbour."""
    return AllOf((
        OnlyKinds(("collective-permute",), why=PERMUTES_ONLY),
        Exactly("collective-permute", count, elements=_block, axes=("Y",), what=what),
        Forbid("collective-permute", axes=("X",), why=NOTHING_CROSSES_X),
        NeighbourSteps("Y"),
    ))


# --- the references (dense, float64) and the baselines (jax.lax's own collective) -----------

def same(A, *, mesh):
    """The gathered or re-split array: the values do not change, only where they live."""
    return A


def summed(A, *, mesh):
    """The sum of the nY partial sums."""
    return A.sum(0)


def _own(body, in_spec, out_spec):
    """A baseline: jax.lax's own collective in a shard_map (`body` on each device's block).
    check_vma is off because JAX types an all_gather's result as still varying over Y (its
    replicated twin is all_gather_invariant), and the psum's needs no check."""
    def baseline(A, *, mesh):
        import jax
        from jax.sharding import PartitionSpec as P

        return jax.shard_map(body, mesh=mesh, in_specs=P(*in_spec), out_specs=P(*out_spec), check_vma=False)(A)
    return baseline


def _all_gather(a):
    import jax

    return jax.lax.all_gather(a, "Y", axis=1, tiled=True)


def _psum_scatter(a):
    import jax

    return jax.lax.psum_scatter(a[0], "Y", scatter_dimension=1, tiled=True)


def _psum(a):
    import jax

    return jax.lax.psum(a[0], "Y")


def _all_to_all(a):
    import jax

    return jax.lax.all_to_all(a, "Y", 1, 0, tiled=True)


ASSIGNMENT = Assignment(
    name="collectives",
    title="The collectives by hand",
    book_url="https://jax-ml.github.io/scaling-book/sharding/",
    parts=(
        Part(
            name="ring_all_gather", points=2,
            task="A[B_X, D_Y] -> A[B_X, D]: every device of a Y ring collects its row's blocks, one "
                 "neighbour step at a time, with jax.lax.ppermute.",
            args=(A,), result=GATHERED,
            rules=(*BY_HAND, ring(lambda s: s["nY"] - 1, "nY-1, each of (B/nX)*(D/nY) elements"), RingDirections()),
            reference=same, visible_case=VISIBLE,
            baseline=_own(_all_gather, ("X", "Y"), ("X", None)), cost_case=COST, baseline_label=OWN,
        ),
        Part(
            name="ring_reduce_scatter", points=3,
            task="A[nY_Y, B_X, D] (device y holds the partial sum A[y]) -> A.sum(0)[B_X, D_Y]: each "
                 "partial block travels a Y ring, every device adding its share where it arrives.",
            args=(PARTIALS,), result=SPLIT,
            rules=(*BY_HAND, ring(lambda s: s["nY"] - 1, "nY-1, each of (B/nX)*(D/nY) elements"), RingDirections()),
            reference=summed, visible_case=VISIBLE,
            baseline=_own(_psum_scatter, ("Y", "X", None), ("X", "Y")), cost_case=COST, baseline_label=OWN,
        ),
        Part(
            name="ring_all_reduce", points=3,
            task="A[nY_Y, B_X, D] -> A.sum(0)[B_X, D] on every device of the Y ring: a reduce-scatter "
                 "ring, then an all-gather ring, both of ppermute steps.",
            args=(PARTIALS,), result=GATHERED,
            rules=(*BY_HAND, ring(lambda s: 2 * (s["nY"] - 1),
                                  "2(nY-1) (a reduce-scatter ring, then an all-gather ring), each of (B/nX)*(D/nY) "
                                  "elements"),
                   RingDirections()),
            reference=summed, visible_case=VISIBLE,
            baseline=_own(_psum, ("Y", "X", None), ("X", None)), cost_case=COST, baseline_label=OWN,
        ),
        Part(
            name="direct_all_to_all", points=3,
            task="A[B_Y, D] -> A[B, D_Y]: rows split over Y become columns split over Y, each device "
                 "sending every other device its one [B/nY, D/nY] block directly, with jax.lax.ppermute.",
            args=(ROWS,), result=COLUMNS,
            rules=(*BY_HAND, AllOf((
                OnlyKinds(("collective-permute",), why=PERMUTES_ONLY),
                Exactly("collective-permute", lambda s: s["nY"] - 1, elements=_exchanged, axes=("Y",),
                        what="nY-1, each of (B/nY)*(D/nY) elements: every block sent once, straight to the device "
                             "that keeps it"),
                Forbid("collective-permute", axes=("X",), why="A is the same on every row of devices: each row "
                                                              "exchanges its own copy over Y."),
            ))),
            reference=same, visible_case=VISIBLE,
            baseline=_own(_all_to_all, ("Y", None), (None, "Y")), cost_case=COST, baseline_label=OWN,
        ),
        Part(
            name="bidirectional_all_gather", points=3,
            task="A[B_X, D_Y] -> A[B_X, D], half of every block travelling each way round the Y ring at "
                 "every step.",
            args=(A,), result=GATHERED,
            rules=(*BY_HAND, AllOf((
                OnlyKinds(("collective-permute",), why=PERMUTES_ONLY),
                Exactly("collective-permute", lambda s: 2 * (s["nY"] - 1), axes=("Y",),
                        what="2(nY-1): nY-1 steps, one permute each way per step"),
                Forbid("collective-permute", axes=("X",), why=NOTHING_CROSSES_X),
                NeighbourSteps("Y"), BothDirections("Y"), BalancedDirections("Y", _rows, _cols),
                HalfBlocks("Y", _rows, _cols),
                MaxTotalBytes(lambda s: (s["nY"] - 1) * _block(s) * F32,
                              what="the one-way ring's (nY-1) blocks: the halves of an odd block are one column "
                                   "apart, and padding both to the wider one sends more"),
            )), RingDirections()),
            reference=same, visible_case=VISIBLE,
            baseline=_own(_all_gather, ("X", "Y"), ("X", None)), cost_case=COST, baseline_label=OWN,
        ),
    ),
    written=(
        WrittenPart("written_collective_costs", 3,
                    "By the book's Part 3 formulas, how long does each collective take on a TPU v5e 4-chip line "
                    "and on a 16-chip ring, beside the kit's estimates of your program and of jax.lax's own?"),
        WrittenPart("written_all_reduce", 1,
                    "Why does an all-reduce cost as much as an all-gather and a reduce-scatter together?"),
    ),
)
