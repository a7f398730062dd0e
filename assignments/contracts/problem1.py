"""Assignment problem1: shard-local work with no communication at all.

The book's Problem 1 (How To Scale Your Model, Part 10, "Worked Problems"):
averages over shards and a roll within each shard, which need no communication.
"""
from __future__ import annotations

import numpy as np

from ..contract import Arg, Assignment, Case, Part, WrittenPart
from ..rules import NoCommunication, ValuesHint
from ..style_rules import JitOnly, UsesShardMap, WorkInsideShardMap

A = Arg("A", ("S", "D"), ("X", "Y"))
VISIBLE = Case(mesh=(2, 4), sizes={"S": 16, "D": 8})
WHY_NO_COMM = "Every output element depends only on data the device already holds, so nothing needs to move."
AVERAGE_NO_COMM = NoCommunication(
    why=WHY_NO_COMM,
    to_try="average each shard where it lives. With jax.jit, reshape so that each shard's rows (and "
           "columns) are an axis of their own and ask for the result sharded P('X', 'Y'); with "
           "shard_map, average the local block.")
ROLL_NO_COMM = NoCommunication(
    why=WHY_NO_COMM,
    to_try="roll inside each shard, not the global array: in shard_map, roll the local block along "
           "its rows. A roll of the whole array moves rows across shard boundaries.")


def shard_average(A, *, mesh):
    nX, _ = mesh
    S, D = A.shape
    return A.reshape(nX, S // nX, D).mean(axis=1)


def block_average(A, *, mesh):
    nX, nY = mesh
    S, D = A.shape
    return A.reshape(nX, S // nX, nY, D // nY).mean(axis=(1, 3))


def roll_within_shards(A, *, mesh, shift):
    nX, _ = mesh
    S, D = A.shape
    blocks = A.reshape(nX, S // nX, D)
    return (np.roll(blocks, shift, axis=1) - blocks).reshape(S, D)


def roll_by_unreduced_slices(A, *, mesh, shift):
    """roll_diff written with slices, ``concatenate([b[-shift:], b[:-shift]])`` on each
    X-shard's block b, the shift not reduced: a roll while |shift| is less than the rows of a
    shard; past that one slice is empty and the other the whole block, so no row moves.
    `SLICES_NOTE` is shown only on a result that is exactly this one, never on another wrong
    roll (a roll of the whole array, which also communicates, has its own advice)."""
    nX, _ = mesh
    S, D = A.shape
    blocks = A.reshape(nX, S // nX, D)
    rolled = np.concatenate([blocks[:, -shift:], blocks[:, :-shift]], axis=1) if shift else blocks
    return (rolled - blocks).reshape(S, D)


SLICES_NOTE = ("Your result is what a roll built from slices (concatenate([b[-shift:], b[:-shift]])) gives "
               "when |shift| is at least the rows each X-shard holds (S / nX): one slice is then empty and "
               "the other the whole block, so no row moves. Inside a shard the roll wraps around: reduce "
               "the shift modulo the rows first (shift % rows), as jnp.roll does.")


def _averaging_part(name, task, result, reference, style):
    written = (JitOnly(),) if style == "jit" else (UsesShardMap(), WorkInsideShardMap())
    return Part(
        name=name, points=2, task=task, args=(A,), result=result, rules=(AVERAGE_NO_COMM, *written),
        reference=reference, visible_case=VISIBLE,
    )


ASSIGNMENT = Assignment(
    name="problem1",
    title="Problem 1: shard-local averages and rolls",
    book_url="https://jax-ml.github.io/scaling-book/jax-stuff/",
    parts=(
        _averaging_part(
            "shard_average_jit",
            "Row i is the mean over the rows of X-shard i; jax.jit only, no shard_map.",
            Arg("out", ("nX", "D"), ("X", "Y")), shard_average, "jit"),
        _averaging_part(
            "shard_average_shard_map",
            "The same values and sharding as shard_average_jit, written with shard_map.",
            Arg("out", ("nX", "D"), ("X", "Y")), shard_average, "shard_map"),
        _averaging_part(
            "block_average_jit",
            "Element (i, j) is the mean of block (i, j); jax.jit only, no shard_map.",
            Arg("out", ("nX", "nY"), ("X", "Y")), block_average, "jit"),
        _averaging_part(
            "block_average_shard_map",
            "The same values and sharding as block_average_jit, written with shard_map.",
            Arg("out", ("nX", "nY"), ("X", "Y")), block_average, "shard_map"),
        Part(
            name="roll_diff", points=2,
            task="Inside each X-shard, roll(rows, shift, axis=0) - rows, for any static shift.",
            args=(A,), result=Arg("out", ("S", "D"), ("X", "Y")),
            rules=(ROLL_NO_COMM, ValuesHint(SLICES_NOTE, when=roll_by_unreduced_slices)),
            reference=roll_within_shards, statics=("shift",),
            visible_case=Case(mesh=(2, 4), sizes={"S": 16, "D": 8}, statics={"shift": 3}),
        ),
    ),
    written=(
        WrittenPart(
            "written_communication", 2,
            "Was any communication added to your functions, and why or why not?"),
    ),
)
