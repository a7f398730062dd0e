"""Every rule, alone, on programs built by hand: no JAX, no compilation.

A rule on the compiled program reads an `assignments.hlo.ProgramAnalysis`; a style rule reads
an `assignments.lowered.LoweredProgram`. Here both are stated by hand, small, each to show one
thing: for every rule in the registry (`assignments.rules.RULES`), a program that keeps it
passes, and one that breaks it fails with a message naming what was observed, on the edges
each rule's docstring promises (loops with no known trip count, wrap-around ring steps, mesh
axes of one device, types wider than float32, routing bookkeeping). How XLA really writes these programs is the
compiled corpora's to show (tests/submissions); what a rule makes of what it reads is shown
here, in a moment. A rule added to the registry without an example here fails
`test_every_rule_in_the_registry_has_examples_here`.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from assignments.contract import PROBLEM_KINDS, Case
from assignments.contracts import get_assignment  # (finds every contract: each one's rules join RULES)
from assignments.contracts.problem2 import (SHARE_TEXT, NoGatherOverX, SmallValues, TokensByAllToAll, _dense_share,
                                            per_device_f)
from assignments.hlo import ArrayShape, Collective, Event, ProgramAnalysis, Stage, Value
from assignments.lowered import LoweredProgram, ShardMapInput, WrittenCollective
from assignments.rules import (RULES, AllOf, AnyCommunication, BalancedDirections, BothDirections, Exactly, Forbid,
                               HalfBlocks, Hint, LargestMatmul, MatmulsInTheRing, MaxMatmulFlops, MaxTotalBytes,
                               NeighbourSteps, NoCommunication, NoValueAtLeast, OnlyKinds, OnlyWhen,
                               PiecesMultipliedApart, Program, ReducesOverAll, RingDirections, SplitReduction,
                               ValuesHint, WrongValues)
from assignments.steps import MAX_EVENTS
from assignments.style_rules import JitOnly, KeepsOnAxis, UsesShardMap, WorkInsideShardMap, WritesCollective

PART = get_assignment("problem2").part("moe_all_to_all")
"""The part the programs belong to: W[E, D, F] at P('X', None, 'Y'), A[S, D] at P('X', 'Y'),
B int32[S] at P('X'). Style rules name it and read its arguments; the other rules ignore it."""

SIZES = {"S": 16, "D": 8, "F": 16, "E": 4}
CASE = Case((2, 4), SIZES)
"""nX = 2, nY = 4: a device holds S/nX = 8 tokens, D/nY = 2 of each token's columns, F/nY = 4
result columns, E/nX = 2 experts."""
ONE_ROW = Case((1, 8), SIZES)
"""X of one device: nothing is reduced or routed over it, and no shard_map shows."""
TWO_COLUMNS = Case((4, 2), SIZES)
"""Y of two devices: its one neighbour is both ring directions."""
ONE_COLUMN = Case((8, 1), SIZES)
"""Y of one device."""

ROUTING = np.array([0, 1, 2, 3] * 4, dtype=np.int32)
"""B on `CASE`: each row of devices sends 4 of its 8 tokens to the other row, and 4 pairs go
from each row to each (m = 4): routing each token only to its expert's row needs
nX * m * (D + F/nY) * 4 = 2 * 4 * 12 * 4 = 384 bytes per device, and the all-to-alls must carry
at least 4 tokens' D/nY floats, 4 * 8 * 4 / 4 = 32 bytes."""


# ---------------------------------------------------------------------------------------
# Programs, built by hand


def arr(*dims: int, dtype: str = "f32") -> ArrayShape:
    return ArrayShape(dtype, tuple(dims))


def coll(kind: str, axes: str, *shapes: ArrayShape, count: int | None = 1, group: int = 4, shifts=(),
         results: tuple[ArrayShape, ...] | None = None, **more) -> Collective:
    """A collective over `axes` ("X", "Y", "XY", "" for none) sending `shapes` per device."""
    return Collective(kind=kind, axes=tuple(axes), operands=shapes, results=shapes if results is None else results,
                      count=count, group_size=group, shifts=tuple(shifts), **more)


def permute(axes: str, *shapes: ArrayShape, shifts=(1,), group: int = 4, **more) -> Collective:
    return coll("collective-permute", axes, *shapes, shifts=shifts, group=group, **more)


def compiled(*collectives: Collective, values=(), temp: int | None = None, dots=None, vector: float | None = None,
             largest: float | None = None, stages=(), mesh=(2, 4), inputs=()) -> Program:
    """A compiled case as the rules read it: its `ProgramAnalysis`, and the case's inputs."""
    analysis = ProgramAnalysis(
        collectives=tuple(collectives), largest_values=tuple(values), temp_bytes=temp, num_devices=math.prod(mesh),
        dot_flops=None if dots is None else tuple(dots), vector_flops=vector, largest_matmul=largest,
        mesh_shape=tuple(mesh), axis_names=("X", "Y"), stages=tuple(stages))
    return Program(PART, analysis, inputs=tuple(inputs))


def matmul(flops: float, after=(), reads=()) -> Event:
    return Event(flops=float(flops), after=tuple(after), reads=tuple(reads))


def sends(collective: int, after=(), reads=()) -> Event:
    return Event(collective=collective, after=tuple(after), reads=tuple(reads))


class LoweredByHand(LoweredProgram):
    """What the style rules read of a lowered program, stated by hand instead of parsed (no MLIR,
    no JAX): its operations, the work jax.jit does around its shard_map, the collectives written
    in it with the arguments (0 W, 1 A, 2 B) each carries, and its shard_map's inputs.
    `uses_shard_map` is `LoweredProgram`'s own, read from `ops`. `asked` records the
    (mesh, narrower_than) each reading of the collectives asked for."""

    def __init__(self, ops=(), outside=(), collectives=(), inputs=()):
        # LoweredProgram's readings are cached properties: stated here, they are never parsed.
        self.__dict__.update(ops=frozenset(ops), work_outside_shard_map=frozenset(outside),
                             shard_map_inputs=list(inputs))
        self.text = "(stated by hand)"
        self.collectives = list(collectives)
        self.asked: list[tuple] = []

    def written_collectives(self, mesh_shape, narrower_than=0):
        self.asked.append((tuple(mesh_shape), narrower_than))
        return self.collectives


SHARDY = ("func.func", "sdy.manual_computation", "stablehlo.dot_general", "func.return")
GSPMD = ("func.func", "stablehlo.custom_call", "custom_call:SPMDFullToShardShape",
         "custom_call:SPMDShardToFullShape", "stablehlo.dot_general", "func.return")
W, A, B = 0, 1, 2


def written(op: str, axes: str, carries=(), computed_from=None, in_rows: bool = True) -> WrittenCollective:
    """A collective as the lowered program writes it: over `axes`, carrying arguments `carries`
    as they are, computed from `computed_from` (by default what it carries). Not `in_rows`: what
    it carries is narrower than one row of the tokens (a number made from them)."""
    carried = (frozenset(carries),)
    sources = (frozenset(carries if computed_from is None else computed_from),)
    whole = (sources, carried) if in_rows else ((frozenset(),), (frozenset(),))
    return WrittenCollective(op, frozenset(axes), sources, carried, *whole)


def arrives(*carries: int, split: str = "XY", as_it_arrives: bool = True, left_whole: str = "") -> ShardMapInput:
    return ShardMapInput(frozenset(carries), as_it_arrives, frozenset(split), frozenset(left_whole))


ROUTES = [arrives(W, split="XY"), arrives(A, split="XY"), arrives(B, split="X")]
"""The shard_map of problem2's routed parts, taking each argument as it arrives."""


def lowered(*, ops=SHARDY, outside=(), collectives=(), inputs=ROUTES) -> Program:
    return Program(PART, None, LoweredByHand(ops, outside, collectives, inputs))


# ---------------------------------------------------------------------------------------
# The examples: a rule, a program that keeps it, one that breaks it, and what the message names


@dataclasses.dataclass(frozen=True)
class Example:
    """A rule on one case, a program that keeps it, and one that breaks it."""

    name: str
    """The edge it shows (the test's id)."""
    rule: object
    keeps: Program
    breaks: Program | None = None
    """None: the example shows a program the rule lets pass, and no failure."""
    observed: tuple[str, ...] = ()
    """Words the broken program's messages must hold: what was observed, and what is allowed."""
    absent: tuple[str, ...] = ()
    """Words they must not hold (what is not to blame)."""
    case: Case = CASE


def found(rule, program: Program, case: Case) -> list[str]:
    """The rule's messages on one case: `violations(analysis, case, inputs)` for a rule on the
    compiled program, `problems(program, case)` for a style rule (it reads `program.lowered`)."""
    if rule.reads_lowered:
        return rule.problems(program, case)
    return rule.violations(program.analysis, case, program.inputs)


TOKENS = arr(4, 8)          # 128 bytes
EXAMPLES: dict[str, list[Example]] = {}


def example(*items: Example) -> None:
    for item in items:
        EXAMPLES.setdefault(item.rule.code, []).append(item)


example(
    Example("a permute", NoCommunication(why="Each row stays on its device.", to_try="roll within the shard"),
            compiled(), compiled(permute("Y", TOKENS, count=3)),
            ("communication observed: collective-permute over Y of f32[4,8] (128 bytes) x3; allowed: none",
             "Each row stays on its device. Try: roll within the shard")),
    Example("uncounted, over no axis", NoCommunication(), compiled(),
            compiled(coll("all-reduce", "", arr(2), count=None, group=1)),
            ("all-reduce over no axis of f32[2] (8 bytes) an unknown number of times",)),
    Example("judges nothing", AnyCommunication(),
            compiled(coll("all-gather", "XY", arr(64, 64), count=None), permute("Y", arr(64, 64), shifts=(2,)),
                     values=[Value("huge", arr(1024, 1024), "dot")], largest=1e12, dots=[("f32", 1e12)])),
    Example("another kind", OnlyKinds(("collective-permute",), why="Write the ring with ppermute."),
            compiled(permute("Y", TOKENS, shifts=(1,)), permute("Y", TOKENS, shifts=(3,))),
            compiled(permute("Y", TOKENS), coll("all-gather", "Y", TOKENS)),
            ("communication observed: all-gather over Y of f32[4,8] (128 bytes) x1; allowed: only collective-permute",
             "Write the ring with ppermute."), absent=("collective-permute over Y",)),
    Example("over an axis named, of several axes", Forbid("all-gather", axes=("X",), why="Gather the tokens."),
            compiled(coll("all-gather", "Y", TOKENS), coll("all-reduce", "X", TOKENS)),
            compiled(coll("all-gather", "XY", TOKENS, group=8), coll("all-gather", "Y", arr(2))),
            ("communication observed: all-gather over X+Y of f32[4,8]", "allowed: no all-gather over X. Gather"),
            absent=("f32[2]",)),
    Example("an all-to-all of copies gathers", Forbid("all-gather", axes=("X",)),
            compiled(coll("all-to-all", "X", TOKENS, group=2)),
            compiled(coll("all-to-all", "X", TOKENS, group=2, copies=True)),
            ("all-to-all over X of f32[4,8]", "an all-to-all whose blocks are all copies of one value",
             "counts as one")),
    Example("of the types named", Forbid("all-gather", dtypes=("f", "bf")),
            compiled(coll("all-gather", "X", arr(8, dtype="s32"), group=2)),
            compiled(coll("all-gather", "X", arr(8, dtype="bf16"), group=2)),
            ("all-gather over X of bf16[8] (16 bytes)", "allowed: no all-gather")),
)

THREE = Exactly("all-reduce", count=lambda s: s["nY"] - 1, elements=lambda s: 2 * s["D"], axes=("Y",))
"""nY - 1 = 3 all-reduces over Y of 16 elements each."""
example(
    Example("too many runs, loops counted", THREE,
            compiled(coll("all-reduce", "Y", arr(16), count=2), coll("all-reduce", "Y", arr(16)),
                     coll("all-reduce", "X", arr(99), group=2)),
            compiled(coll("all-reduce", "Y", arr(16), count=4)),
            ("all-reduce over Y runs 4 time(s); allowed: exactly 3",
             "(observed: all-reduce over Y of f32[16] (64 bytes) x4)"), absent=("f32[99]",)),
    Example("none over the axis", THREE, compiled(coll("all-reduce", "Y", arr(16), count=3)),
            compiled(coll("all-reduce", "X", arr(16), count=3, group=2)),
            ("no all-reduce over Y in the program (the program's collectives: all-reduce over X of f32[16] "
             "(64 bytes) x3); allowed: exactly 3",)),
    Example("nothing at all", THREE, compiled(coll("all-reduce", "Y", arr(16), count=3)), compiled(),
            ("no all-reduce over Y in the program (the program communicates nothing); allowed: exactly 3",)),
    Example("uncounted loop", THREE, compiled(coll("all-reduce", "Y", arr(16), count=3)),
            compiled(coll("all-reduce", "Y", arr(16), count=None)),
            ("the all-reduce over Y runs inside a loop whose trip count is not known at compile time, so how "
             "often it runs cannot be counted", "allowed: exactly 3", "jax.lax.fori_loop with Python ints"),
            absent=("runs 0 time(s)",)),
    Example("wrong size", THREE, compiled(coll("all-reduce", "Y", arr(4, 4), count=3)),
            compiled(coll("all-reduce", "Y", arr(4, 8), count=3)),
            ("all-reduce of the wrong size: all-reduce over Y of f32[4,8] (128 bytes) x3; allowed: 16 elements "
             "per device each",), absent=("wider than float32",)),
    Example("wider than float32", THREE, compiled(coll("all-reduce", "Y", arr(8, dtype="c64"), count=3)),
            compiled(coll("all-reduce", "Y", arr(16, dtype="f64"), count=3)),
            ("all-reduce of the wrong size: all-reduce over Y of f64[16] (128 bytes) x3",
             "a collective of a type wider than float32 counts by its bytes: f64[16] is as large as 32 float32 "
             "values")),
)

TOKENS_ONCE = MaxTotalBytes(lambda s: s["S"] * s["D"] * 4, what="the tokens once")
"""512 bytes per device on `CASE`."""
example(
    Example("runs summed", TOKENS_ONCE, compiled(coll("all-gather", "X", TOKENS, count=4, group=2)),
            compiled(coll("all-gather", "X", TOKENS, count=4, group=2), permute("Y", arr(32))),
            ("sends 640 bytes per device; allowed: at most 512 (the tokens once)",
             "Observed: all-gather over X of f32[4,8] (128 bytes) x4; collective-permute over Y of f32[32]")),
    Example("uncounted loop", TOKENS_ONCE, compiled(permute("Y", arr(2), count=8)),
            compiled(permute("Y", arr(2), count=None)),
            ("cannot bound the bytes sent: a collective runs inside a loop with no compile-time trip count",
             "collective-permute over Y of f32[2] (8 bytes) an unknown number of times")),
    Example("wider than float32, by bytes", TOKENS_ONCE, compiled(permute("Y", arr(32, dtype="s64"), count=2)),
            compiled(permute("Y", arr(32, dtype="f64"), count=3)),
            ("sends 768 bytes per device; allowed: at most 512",)),
    # A ring algorithm's bytes: an all-reduce of 256 bytes over 4 devices puts 2 * 3/4 * 256 = 384
    # on the links, a ring of permutes the 256 it sends.
    Example("a native all-reduce priced as a ring", MaxTotalBytes(300, ring=True),
            compiled(permute("Y", arr(16), count=4)), compiled(coll("all-reduce", "Y", arr(64))),
            ("sends 384 bytes per device; allowed: at most 300 (the minimum)",)),
    Example("an all-gather priced by what it gathers", MaxTotalBytes(191, ring=True),
            compiled(coll("all-gather", "Y", arr(16), results=(arr(48),))),
            compiled(coll("all-gather", "Y", arr(16), results=(arr(64),))),
            ("sends 192 bytes per device; allowed: at most 191",)),
    Example("only the kinds named", MaxTotalBytes(100, kinds=("all-to-all",)),
            compiled(coll("all-gather", "X", arr(1024), group=2), coll("all-to-all", "X", arr(2, 8), group=2)),
            compiled(coll("all-gather", "X", arr(1024), group=2), coll("all-to-all", "X", TOKENS, group=2)),
            ("sends 128 bytes per device; allowed: at most 100", "Observed: all-to-all over X of f32[4,8]"),
            absent=("all-gather",)),
)

ARGUMENTS = ("W", "A", "B")
ACTIVATIONS = NoValueAtLeast(lambda s: s["S"] * s["D"], "the global [S, D] tokens", why="Keep each device's rows.",
                             arguments=ARGUMENTS)
"""No activation of S*D = 128 elements or more."""
ONE_HOT = Value("reduce-window.7", arr(16, 8, dtype="s32"), "reduce-window", sources=(B,), bookkeeping=True)
"""Routing bookkeeping as large as the tokens: a cumulative sum of a one-hot of the expert ids
(GShard's rank of each token among its expert's), computed from the ids B alone."""
example(
    Example("a value as large, by what it is", ACTIVATIONS,
            compiled(values=[Value("fusion.1", arr(8, 15), "fusion", sources=(A,))]),
            compiled(values=[Value("all-gather.3", arr(16, 8), "all-gather", sources=(A,)),
                             Value("add.2", arr(8, 8), "add", sources=(A,))]),
            ("the program computes f32[16,8] (128 elements", "from A",
             "allowed: no value with 128 or more elements (the global [S, D] tokens). Keep each device's rows."),
            absent=("all-gather.3", "f32[8,8]")),
    Example("bookkeeping never counts", ACTIVATIONS, compiled(values=[ONE_HOT]),
            compiled(values=[ONE_HOT, Value("multiply.4", arr(16, 8, dtype="s32"), "multiply", sources=(A, B))]),
            ("s32[16,8] (128 elements", "from A and B"), absent=("reduce-window", "multiply.4")),
    Example("wider than float32", ACTIVATIONS, compiled(values=[Value("fusion.1", arr(8, 7, dtype="f64"), "fusion")]),
            compiled(values=[Value("fusion.2", arr(8, 8, dtype="f64"), "fusion")]),
            ("f64[8,8] (64 elements of 8 bytes: as large as 128 float32 values",)),
    Example("three named", ACTIVATIONS, compiled(),
            compiled(values=[Value(f"copy.{i}", arr(*dims), "copy") for i, dims in
                             enumerate([(16, 8), (8, 16), (32, 4), (4, 32)])]),
            ("f32[16,8]", "f32[8,16]", "f32[32,4]"), absent=("f32[4,32]",)),
)

WHOLE = SplitReduction("Y", pieces=2, whole=lambda s: s["S"] // s["nX"] * per_device_f(s))
"""A device's result is 8 x 4 = 32 elements; split over Y into 2 pieces at least."""
example(
    Example("two psums", WHOLE, compiled(coll("all-reduce", "Y", arr(8, 2)), coll("all-reduce", "Y", arr(8, 2))),
            compiled(coll("all-reduce", "Y", arr(8, 4))),
            ("the reduction over Y runs in one piece: all-reduce over Y of f32[8,4] (128 bytes) x1 reduces the "
             "whole result (32 elements per device) at once; allowed: at least 2 pieces",)),
    Example("one combined psum of two pieces", WHOLE, compiled(coll("all-reduce", "Y", arr(8, 2), arr(8, 2))),
            compiled(coll("all-reduce", "Y", arr(30), arr(2))),
            ("the reduction over Y is split unevenly: one piece carries 30 of the result's 32 elements per device",
             "allowed: no piece above 90% of the result")),
    Example("a psum in a counted loop", SplitReduction("Y"), compiled(coll("all-reduce", "Y", arr(4), count=2)),
            compiled(coll("all-reduce", "Y", arr(4))),
            ("the reduction over Y runs as 1 piece(s) (all-reduce over Y of f32[4] (16 bytes) x1); allowed: at "
             "least 2",)),
    Example("a ring of permutes, or nothing reduced", SplitReduction("Y"),
            compiled(permute("Y", arr(8), count=3)),
            compiled(coll("all-to-all", "X", arr(8), group=2)),
            ("nothing is reduced over Y (observed: all-to-all over X of f32[8] (32 bytes) x1)",
             "psum over 'Y'")),
    Example("a reduce-scatter and an all-to-all are pieces, a psum over the other axis is not", SplitReduction("Y"),
            compiled(coll("reduce-scatter", "Y", arr(8)), coll("all-to-all", "Y", arr(8))),
            compiled(coll("all-reduce", "X", arr(8), count=2, group=2)),
            ("nothing is reduced over Y: the program reduces over X instead (all-reduce over X of f32[8]",
             "check the axis name your psum is given")),
    Example("an all-to-all of the whole result", WHOLE,
            compiled(coll("all-to-all", "Y", arr(4, 2), arr(4, 2), count=2)),
            compiled(coll("all-to-all", "Y", arr(8, 2), arr(8, 2))),
            ("runs in one piece: all-to-all over Y of f32[8,2], f32[8,2]",)),
    Example("a psum in an uncounted loop", SplitReduction("Y"), compiled(coll("all-reduce", "Y", arr(4), count=2)),
            compiled(coll("all-reduce", "Y", arr(4), count=None)),
            ("the reduction over Y runs inside a loop whose trip count is not known at compile time, so its pieces "
             "cannot be counted", "allowed: at least 2 pieces"), absent=("runs as 1 piece(s)",)),
    Example("Y of one device is not judged", WHOLE, compiled(coll("all-reduce", "X", arr(8, 4), group=8)),
            case=ONE_COLUMN),
)

example(
    Example("one way", BothDirections("Y"),
            compiled(permute("Y", TOKENS, shifts=(1,)), permute("Y", TOKENS, shifts=(3,))),
            compiled(permute("Y", TOKENS, shifts=(1,), count=3)),
            ("collective-permutes over Y go +1 only; allowed: both ring directions (+1 and -1)",)),
    Example("the wrap-around step is -1", BothDirections("Y"), compiled(permute("Y", TOKENS, shifts=(1, 3))),
            compiled(permute("Y", TOKENS, shifts=(3,))), ("collective-permutes over Y go -1 only",)),
    Example("no permute over the axis", BothDirections("Y"), compiled(permute("Y", TOKENS, shifts=(1, 3))),
            compiled(permute("X", TOKENS, shifts=(1,), group=2), coll("all-gather", "Y", TOKENS)),
            ("no collective-permute over Y; allowed: both ring directions",)),
    Example("a ring of two is not judged", BothDirections("Y"), compiled(permute("Y", TOKENS, group=2)),
            case=TWO_COLUMNS),
    Example("jumps", NeighbourSteps("Y"),
            compiled(permute("Y", TOKENS, shifts=(1,)), permute("Y", TOKENS, shifts=(3,)),
                     permute("XY", TOKENS, shifts=(2,), group=8)),
            compiled(permute("Y", TOKENS, shifts=(1,)), permute("Y", TOKENS, shifts=(2,))),
            ("collective-permutes over Y that jump +2 devices: collective-permute over Y of f32[4,8] (128 bytes) "
             "x1; allowed: steps to a neighbour only (+1 or -1 along Y, wrapping round)",)),
    Example("a jump backwards, and more", NeighbourSteps("Y"), compiled(permute("Y", TOKENS, shifts=(1, 7), group=8)),
            compiled(*(permute("Y", arr(n), shifts=(5,), group=8) for n in (1, 2, 3, 4))),
            ("jump -3 devices", "f32[1]", "f32[2]", "and 2 more"), absent=("f32[3]",), case=ONE_ROW),
)

HALVES = HalfBlocks("Y", rows=lambda s: s["S"] // s["nX"] // 2, cols=lambda s: s["D"] - 2)
"""Half of a [4, 6] block: 12 elements, split along either dimension."""
ODD = HalfBlocks("Y", rows=lambda s: 3, cols=lambda s: 5)
"""Half of a [3, 5] block: from 5 elements (1 of its 3 rows) to 10 (2 of them)."""
example(
    Example("a whole block", HALVES,
            compiled(permute("Y", arr(4, 3), shifts=(1,)), permute("Y", arr(2, 6), shifts=(3,)),
                     permute("X", arr(4, 6), group=2)),
            compiled(permute("Y", arr(4, 3)), permute("Y", arr(4, 6), shifts=(3,))),
            ("collective-permute of the wrong size: collective-permute over Y of f32[4,6] (96 bytes) x1; allowed: "
             "12 elements each, half of a [4, 6] block",), absent=("f32[4,3]",)),
    Example("an odd block", ODD, compiled(permute("Y", arr(3, 2)), permute("Y", arr(3, 3)), permute("Y", arr(5))),
            compiled(permute("Y", arr(11))), ("allowed: 5 to 10 elements each, half of a [3, 5] block",)),
    Example("wider than float32", HALVES, compiled(permute("Y", arr(4, 3, dtype="s32"))),
            compiled(permute("Y", arr(4, 3, dtype="f64"))),
            ("collective-permute over Y of f64[4,3] (96 bytes)",
             "f64[4,3] is as large as 24 float32 values")),
)

HALF = arr(4, 3)                                  # 48 bytes: half of a [4, 6] block
BALANCED = BalancedDirections("Y", rows=lambda s: 4, cols=lambda s: 6)
ODD_BALANCE = BalancedDirections("Y", rows=lambda s: 3, cols=lambda s: 5)


def in_steps(*steps: tuple[int, ...], runs: int | None = 1, loop: str = "") -> Stage:
    """A stage whose collectives (indices into the program's) run in `steps`: each of a step
    needs every one of the step before, none of its own step."""
    events, previous = [], ()
    for step in steps:
        first = len(events)
        events += [sends(c, after=previous) for c in step]
        previous = tuple(range(first, len(events)))
    return Stage(tuple(events), runs, loop)


BOTH_WAYS = (permute("Y", HALF, shifts=(1,)), permute("Y", HALF, shifts=(3,)))
LOPSIDED = (permute("Y", HALF, shifts=(1,)), permute("Y", arr(2, 3), shifts=(3,)))


def ring(collectives, *stages: Stage, mesh=(2, 4)) -> Program:
    return compiled(*collectives, stages=stages, mesh=mesh)


def pairs_along_y(step: dict[int, int]) -> tuple[tuple[int, int], ...]:
    """(source, target) device pairs on the 2x4 mesh (device x*4 + y) for a move from each y to
    step[y], in both rows."""
    return tuple((x * 4 + y, x * 4 + t) for x in range(2) for y, t in step.items())


# Each device sends one way only, in turns (0 -> 1, 1 -> 0, 2 -> 3, 3 -> 2): the two directions'
# totals balance, and one direction of every link is idle.
IN_TURNS = permute("Y", HALF, shifts=(1, 3), pairs=pairs_along_y({0: 1, 1: 0, 2: 3, 3: 2}))
FORWARD = permute("Y", HALF, shifts=(1,), pairs=pairs_along_y({0: 1, 1: 2, 2: 3, 3: 0}))   # 3 -> 0 wraps: +1
BACKWARD = permute("Y", HALF, shifts=(3,), pairs=pairs_along_y({0: 3, 1: 0, 2: 1, 3: 2}))  # 0 -> 3 wraps: -1
example(
    Example("one step", BALANCED, ring(BOTH_WAYS, in_steps((0, 1))), ring(LOPSIDED, in_steps((0, 1))),
            ("ring phase 1 of 1 (straight-line code): 24 bytes per device go -1 and 48 go +1; allowed: the same "
             "bytes each way at every step (the [4, 6] block splits evenly)",)),
    Example("an odd block, within one column", ODD_BALANCE,
            ring((permute("Y", arr(3, 3)), permute("Y", arr(3, 2), shifts=(3,))), in_steps((0, 1))),
            ring((permute("Y", arr(3, 5)), permute("Y", arr(1), shifts=(3,))), in_steps((0, 1))),
            ("4 bytes per device go -1 and 60 go +1",
             "within one row or column of the odd [3, 5] block, 20 bytes")),
    Example("a loop's phase, step by step", BALANCED,
            ring(BOTH_WAYS * 2, in_steps((0, 1), (2, 3), runs=3, loop="while.7")),
            ring(BOTH_WAYS + LOPSIDED, in_steps((0, 1), (2, 3), runs=3, loop="while.7")),
            ("ring phase 1 of 1 (a loop body run 3 times), step 2 of its 2: 24 bytes per device go -1",)),
    Example("phase by phase, an uncounted loop among them", BALANCED,
            ring(BOTH_WAYS * 2, in_steps((0, 1), runs=None, loop="while.2"), in_steps((2, 3))),
            ring(LOPSIDED + BOTH_WAYS, in_steps((0, 1), runs=None, loop="while.2"), in_steps((2, 3))),
            ("ring phase 1 of 2 (a loop body run an unknown number of times): 24 bytes per device go -1",),
            absent=("phase 2 of 2",)),
    Example("branches of a conditional never run together", BALANCED, ring(BOTH_WAYS, in_steps((0, 1))),
            ring((permute("Y", HALF, computation="branch_0"), permute("Y", HALF, shifts=(3,), computation="branch_1")),
                 in_steps((0, 1))),
            ("0 bytes per device go -1 and 48 go +1",)),
    Example("each device both ways, wrap-around steps included", BALANCED,
            ring((FORWARD, BACKWARD), in_steps((0, 1))), ring((IN_TURNS,), in_steps((0,))),
            ("ring phase 1 of 1 (straight-line code): ",)),
    Example("fails closed without the steps", BALANCED, ring(BOTH_WAYS, in_steps((0, 1))),
            compiled(*BOTH_WAYS),
            (f"too many collectives and matmuls (over {MAX_EVENTS:,})", "write the ring as a loop")),
    Example("one way is not its to judge", BALANCED, compiled(permute("Y", HALF), permute("Y", arr(2, 3)))),
    Example("a ring of two is not judged", BALANCED, ring(LOPSIDED, in_steps((0, 1)), mesh=(4, 2)),
            case=TWO_COLUMNS),
)

example(
    Example("over one axis of two", ReducesOverAll("all-reduce", why="Each device holds a partial sum."),
            compiled(coll("all-reduce", "XY", arr(8), group=8)),
            compiled(coll("all-reduce", "X", arr(8), group=2)),
            ("the work is split over X only, not over Y (4 devices): the all-reduce that adds the devices' "
             "partial results runs over X (all-reduce over X of f32[8] (32 bytes) x1); allowed: one over X and Y. "
             "Each device holds a partial sum.",)),
    Example("over neither", ReducesOverAll("all-reduce"),
            compiled(coll("all-reduce", "X", arr(8), group=2), coll("all-reduce", "Y", arr(8))),
            compiled(coll("all-gather", "Y", arr(8))),
            ("the work is not split over X (2 devices) and Y (4 devices): no all-reduce adds the devices' partial "
             "results (the program's collectives: all-gather over Y of f32[8]",)),
    Example("nothing at all, on a mesh of one row", ReducesOverAll("all-reduce"),
            compiled(coll("all-reduce", "Y", arr(8), group=8), mesh=(1, 8)), compiled(mesh=(1, 8)),
            ("the work is not split over Y (8 devices): no all-reduce adds the devices' partial results (the "
             "program communicates nothing); allowed: one over Y",), case=ONE_ROW),
)

SHARE = MaxMatmulFlops(lambda s: 2 * s["S"] * s["D"] * s["F"] // (s["nX"] * s["nY"]))
"""2 * S * D * F / (nX * nY) = 512 FLOPs per device."""
example(
    Example("dots and products written out", SHARE, compiled(dots=[("f32", 384.0)], vector=128.0),
            compiled(dots=[("bf16", 300.0), ("f32", 212.0)], vector=64.0),
            ("the program's matmuls (dots, and multiplies and sums) do 576 FLOPs per device; allowed: at most 512",)),
    Example("not measured", SHARE, compiled(dots=None)),
)

BLOCK = LargestMatmul(lambda s: 64, "one block's product", why="One block per step.")
example(
    Example("the gathered operand at once", BLOCK, compiled(largest=64.0), compiled(largest=256.0),
            ("one matmul in the program does 256 FLOPs per device at once, 4 times one ring step's; allowed: at "
             "most 64 (one block's product)", "One block per step.")),
    Example("not measured", BLOCK, compiled(largest=None)),
    Example("a block of nothing", LargestMatmul(0, "nothing"), compiled(largest=0.0), compiled(largest=1.0),
            ("inf times one ring step's",)),
)

IN_THE_RING = MatmulsInTheRing("Y", flops=lambda s: 64)
"""At most one block's product (64 FLOPs) outside the ring over Y."""
P0, P1, P2 = (permute("Y", HALF) for _ in range(3))
UNROLLED = Stage((sends(0), matmul(64), sends(1, after=(0,)), matmul(64, after=(0,)), matmul(64, after=(2,))))
"""A ring unrolled in Python: each product beside the next step's permute, the last alone."""
AFTER_THE_RING = Stage((sends(0), sends(1, after=(0,)), sends(2, after=(1,)),
                        matmul(64, after=(2,)), matmul(64, after=(2,)), matmul(64, after=(2,))))
"""A ring that only moves data, every product made after it."""
LOOPED = Stage((sends(0, reads=(0,)), matmul(64, reads=(1,))), runs=3, loop="while.4", carried=((0,), (1,)))
"""A ring's loop: each run's product beside its permute."""
SERIAL = Stage((sends(0, reads=(0,)), matmul(64, after=(0,), reads=(0,))), runs=3, loop="while.4", carried=((0, 1),))
"""A loop whose product waits for the permute, and whose next permute waits for the product."""
UNCOUNTED = Stage((sends(0), matmul(64)), runs=None, loop="while.9")
example(
    Example("after the ring", IN_THE_RING, ring((P0, P1), UNROLLED), ring((P0, P1, P2), AFTER_THE_RING),
            ("the program does 192 FLOPs of matmuls per device outside the ring, where no communication runs "
             "beside them (3 block products); allowed: at most 64",)),
    Example("a loop and its last block", IN_THE_RING, ring((P0,), LOOPED, Stage((matmul(64),))),
            ring((P0,), LOOPED, Stage((matmul(64),)), Stage((matmul(64),))),
            ("does 128 FLOPs of matmuls per device outside the ring",)),
    Example("several blocks in one run", IN_THE_RING, ring((P0,), LOOPED),
            ring((P0,), Stage((sends(0), matmul(192)), runs=3, loop="while.4")),
            ("one run of the ring's loop does 192 FLOPs of matmuls per device beside its 1 collective(s) over Y "
             "(3 block products); allowed: at most one block product per step (64)",)),
    Example("a loop that waits on itself", IN_THE_RING, ring((P0,), LOOPED), ring((P0,), SERIAL),
            ("does 192 FLOPs of matmuls per device outside the ring",)),
    Example("a ring over the other axis", IN_THE_RING, ring((P0,), Stage((sends(0), matmul(192)))),
            ring((permute("X", HALF, group=2),), Stage((sends(0), matmul(192)))),
            ("does 192 FLOPs of matmuls per device outside the ring",)),
    Example("uncounted loop", IN_THE_RING, ring((P0,), LOOPED), ring((P0,), UNCOUNTED),
            ("the program multiplies inside a loop whose trip count is not known at compile time",)),
    Example("Y of one device is not judged", IN_THE_RING, ring((P0,), UNCOUNTED, mesh=(8, 1)), case=ONE_COLUMN),
)

APART = PiecesMultipliedApart("Y", flops=lambda s: 64, what="one piece's product")
PIECE = coll("all-reduce", "Y", arr(8, 2), matmul_needs=(64.0,))
example(
    Example("the whole product sliced", APART, compiled(PIECE, PIECE, largest=64.0),
            compiled(PIECE, PIECE, largest=256.0),
            ("one matmul in the program does 256 FLOPs per device at once; allowed: at most 64 (one piece's "
             "product). The whole product is made before any piece of it is reduced",)),
    Example("pieces of a product made whole", APART,
            compiled(PIECE, coll("all-reduce", "X", arr(8, 2), group=2, matmul_needs=(256.0,)), largest=64.0),
            compiled(PIECE, coll("reduce-scatter", "Y", arr(8, 2), matmul_needs=(256.0,)), largest=64.0),
            ("a piece of the reduction over Y is computed from 256 FLOPs of matmuls per device; allowed: at most 64",)),
    Example("uncounted loop", APART, compiled(PIECE, stages=[Stage((matmul(64),), runs=5, loop="while.1")]),
            compiled(PIECE, stages=[Stage((matmul(64),), runs=None, loop="while.1")]),
            ("the program multiplies inside a loop whose trip count is not known at compile time",)),
    Example("a ring judged as one", PiecesMultipliedApart("Y", flops=lambda s: 64, what="a piece", ring=IN_THE_RING),
            ring((P0, P1), UNROLLED), ring((P0, P1, P2), AFTER_THE_RING),
            ("the reduction over Y runs as a ring of collective-permutes, but the program does 192 FLOPs of "
             "matmuls per device outside the ring",)),
    Example("Y of one device is not judged", APART, compiled(PIECE, largest=1e9), case=ONE_COLUMN),
)

# Problem 2 (CASE: D = 8, a device's F/nY = 4 result columns, E/nX = 2 experts, S*D*F/(nX*nY) = 256).
example(
    Example("the dense W[B] gather", SmallValues(_dense_share, SHARE_TEXT),
            compiled(values=[Value("dot.2", arr(8, 8), "dot", sources=(W, A))]),
            compiled(values=[Value("gather.1", arr(16, 8, 4), "gather", sources=(W, B))]),
            ("the program computes f32[16,8,4] (512 elements", "allowed: no value with 256 or more elements (a "
             "device's share of an [S, D, F] array", "is the dense W[B] gather"), absent=("gather.1",)),
    Example("a padded buffer", SmallValues(lambda s: s["S"] * s["D"], "the global [S, D] activations",
                                           where="rounds"),
            compiled(values=[Value("dynamic-update-slice.1", arr(2, 4, 8), "dynamic-update-slice", sources=(A, B))]),
            compiled(values=[Value("dynamic-update-slice.1", arr(2, 8, 8), "dynamic-update-slice", sources=(A, B))]),
            ("f32[2,8,8] (128 elements", "is a padded buffer or its product: 8 slots for each of 2 experts (2 x 8 "
             "= 16 rows, against S = 16)")),
    Example("routing bookkeeping never counts", SmallValues(lambda s: s["S"] * s["D"], "the global [S, D] "
                                                            "activations", where="rounds"),
            compiled(values=[ONE_HOT]),
            compiled(values=[ONE_HOT, Value("convert.3", arr(16, 8), "convert", sources=(A,))]),
            ("f32[16,8] (128 elements", "from A"), absent=("s32", "convert.3")),
    Example("temporary memory", SmallValues(_dense_share, SHARE_TEXT, where="local",
                                            temporary_memory=lambda s: 100),
            compiled(temp=396), compiled(temp=400),
            ("the program holds 400 bytes of temporary memory at once; allowed: less than 400 bytes",
             "many smaller ones live together")),
    Example("temporary memory not reported", SmallValues(_dense_share, SHARE_TEXT, temporary_memory=lambda s: 1),
            compiled(temp=None)),
    Example("tokens gathered", NoGatherOverX(),
            compiled(coll("all-gather", "Y", arr(8, 8)), coll("all-to-all", "X", arr(2, 2, 8), group=2)),
            compiled(coll("all-gather", "X", arr(8, 8), group=2)),
            ("communication observed: all-gather over X of f32[8,8] (256 bytes) x1; allowed: no all-gather over X",
             "Tokens should travel only to the devices that own their experts")),
    Example("results and ids gathered", NoGatherOverX(), compiled(coll("all-gather", "Y", arr(8, dtype="s32"))),
            compiled(coll("all-gather", "XY", arr(8, 4), group=8), coll("all-gather", "X", arr(8, dtype="s32"))),
            ("all-gather over X+Y of f32[8,4]", "That gathers results (rows of F)",
             "all-gather over X of s32[8] (32 bytes)", "routing data")),
    Example("a count gathered", NoGatherOverX(), compiled(coll("all-reduce", "X", arr(1, dtype="s32"), group=2)),
            compiled(coll("all-gather", "X", arr(1, dtype="s32"), group=2, sources=(B,))),
            ("all-gather over X of s32[1] (4 bytes)", "one integer per device", "jax.lax.pmax")),
    Example("tokens gathered as integers", NoGatherOverX(), compiled(),
            compiled(coll("all-gather", "X", arr(8, 8, dtype="s32"), group=2, sources=(A,))),
            ("all-gather over X of s32[8,8] (256 bytes)", "computed from A: activations in another type"),
            absent=("routing data",)),
)

ROUTED = TokensByAllToAll(result=per_device_f)
ROUNDS = (coll("all-to-all", "X", arr(2, 2, 8), count=2, group=2),   # tokens: 2 rounds of chunk 2, 256 bytes
          coll("all-to-all", "X", arr(2, 2, 4), count=2, group=2),   # results back: 128 bytes
          coll("all-to-all", "X", arr(2, 2, dtype="s32"), count=2, group=2),  # expert ids: 32 bytes
          coll("all-reduce", "X", arr(1), count=1, group=2))         # a loop bound: 4 bytes
ON_THE_ROUTING = (None, None, ROUTING)


def routed(*collectives: Collective, inputs=ON_THE_ROUTING) -> Program:
    return compiled(*collectives, inputs=inputs)


example(
    Example("no all-to-all", ROUTED, routed(*ROUNDS), routed(coll("all-gather", "X", arr(8, 8), group=2)),
            ("no all-to-all over X moves the tokens (observed over X: all-gather over X of f32[8,8] (256 bytes) "
             "x1)",)),
    Example("an expert's slice beside", ROUTED, routed(*ROUNDS),
            routed(*ROUNDS, coll("all-reduce", "X", arr(8, 4), group=2)),
            ("floats cross X by all-reduce over X of f32[1] (4 bytes) x1; all-reduce over X of f32[8,4] (128 bytes) "
             "x1: 132 bytes per device, as much as one expert's [D, 4] slice (128 bytes)",)),
    Example("an expert's slice as integers", ROUTED, routed(*ROUNDS),
            routed(*ROUNDS, permute("X", arr(8, 4, dtype="s32"), group=2)),
            ("integers cross X by collective-permute over X of s32[8,4] (128 bytes) x1",)),
    Example("uncounted rounds", ROUTED, routed(*ROUNDS),
            routed(coll("all-to-all", "X", arr(2, 2, 8), count=None, group=2)),
            ("cannot count the bytes moved over X: a collective runs an unknown number of times",)),
    Example("too few tokens carried", ROUTED, routed(*ROUNDS),
            routed(coll("all-to-all", "X", arr(2, 1, 1), group=2)),
            ("the all-to-alls over X carry 8 bytes per device; the tokens need at least 32: 4 of the busiest row's "
             "tokens are bound for other rows",)),
    Example("too many rounds", ROUTED, routed(*ROUNDS),
            routed(coll("all-to-all", "X", arr(2, 2, 8), count=10, group=2),
                   coll("all-to-all", "X", arr(2, 2, 4), count=10, group=2)),
            ("moves 1,920 bytes per device over X; allowed: at most 2x the 384 that an all-to-all routing each "
             "token only to its expert's row needs", "It runs 10 rounds of chunk 2 where the busiest pair of "
             "rows needs 2")),
    Example("rounds of padding", ROUTED, routed(*ROUNDS),
            routed(coll("all-to-all", "X", arr(2, 16, 8), group=2), coll("all-to-all", "X", arr(2, 16, 4), group=2)),
            ("moves 1,536 bytes per device over X", "Your 1 round(s) of chunk 16 are what the busiest pair needs; "
             "the excess is padding: its 4 pairs fill 4 of the 16 slots")),
    Example("rows too wide", ROUTED, routed(*ROUNDS),
            routed(coll("all-to-all", "X", arr(2, 2, 16), count=4, group=2)),
            ("moves 1,024 bytes per device over X", "carries rows of 16 floats, more than a token's D=8")),
    Example("without the routing, the bytes are not judged", ROUTED,
            routed(coll("all-to-all", "X", arr(2, 2, 8), count=10, group=2), inputs=())),
    Example("X of one device is not judged", ROUTED, routed(), case=ONE_ROW),
)

# Style rules (problem2's moe_all_to_all: arguments 0 W, 1 A, 2 B).
example(
    Example("a shard_map", JitOnly(), lowered(ops=("func.func", "stablehlo.dot_general")), lowered(),
            ("moe_all_to_all must use jax.jit only, but the program contains a shard_map.",)),
    Example("GSPMD's shard_map, on any mesh", JitOnly(), lowered(ops=("func.func", "stablehlo.custom_call",
                                                                      "custom_call:Sharding")),
            lowered(ops=GSPMD), ("contains a shard_map",), case=ONE_ROW),
    Example("no shard_map", UsesShardMap(), lowered(), lowered(ops=("func.func", "stablehlo.dot_general")),
            ("moe_all_to_all must be written with jax.shard_map, but the program has none.",)),
    Example("not judged where a shard_map cannot show", UsesShardMap(), lowered(ops=("func.func",)), case=ONE_ROW),
    Example("work around the shard_map", WorkInsideShardMap(), lowered(),
            lowered(outside=("stablehlo.reduce", "stablehlo.dot_general", "add of slices")),
            ("moe_all_to_all must do its work inside its shard_map, but jax.jit computes around it (add of slices, "
             "dot_general, reduce outside the shard_map)",)),
    Example("lowered by GSPMD", WorkInsideShardMap(), lowered(), lowered(ops=GSPMD),
            ("this program's shard_map was lowered with GSPMD (jax_use_shardy_partitioner was turned off)",)),
    Example("not judged where a shard_map cannot show", WorkInsideShardMap(),
            lowered(ops=GSPMD, outside=("stablehlo.reduce",)), case=ONE_ROW),
)

EXPERTS_STAY = KeepsOnAxis("W", "X", pieces_of="A")
TOKENS_OUT = written("all_to_all", "X", carries=(A,))
example(
    Example("W sent over X", EXPERTS_STAY,
            lowered(collectives=[TOKENS_OUT, written("all_reduce", "X", carries=(), computed_from=(W, A)),
                                 written("all_gather", "Y", carries=(W,))]),
            lowered(collectives=[TOKENS_OUT, written("all_gather", "X", carries=(W, A))]),
            ("moe_all_to_all must keep W where it lives, but its all_gather over X carries W itself",)),
    Example("W built around the shard_map", EXPERTS_STAY, lowered(collectives=[TOKENS_OUT]),
            lowered(collectives=[TOKENS_OUT], inputs=[arrives(W, as_it_arrives=False)] + ROUTES[1:]),
            ("its shard_map takes what jax.jit built from W around it",)),
    Example("W not split over X", EXPERTS_STAY, lowered(collectives=[TOKENS_OUT]),
            lowered(collectives=[TOKENS_OUT], inputs=[arrives(W, split="Y")] + ROUTES[1:]),
            ("its shard_map's in_specs do not split W over X as W arrives",)),
    Example("W left whole over X on one of its dimensions", EXPERTS_STAY, lowered(collectives=[TOKENS_OUT]),
            lowered(collectives=[TOKENS_OUT], inputs=[arrives(W, split="XY", left_whole="X")] + ROUTES[1:]),
            ("in_specs do not split W over X",)),
    Example("not judged where a shard_map cannot show", EXPERTS_STAY,
            lowered(collectives=[written("all_gather", "X", carries=(W,))]), case=ONE_ROW),
)

GATHERS = WritesCollective("all_gather", over="X", of="A")
example(
    Example("none written", GATHERS, lowered(ops=SHARDY + ("stablehlo.all_gather",),
                                              collectives=[written("all_gather", "X", carries=(A,))]),
            lowered(collectives=[]),
            ("moe_all_to_all must communicate with jax.lax.all_gather inside its shard_map, but the program calls "
             "none",)),
    Example("over the other axis", GATHERS,  # (what it keeps: a one-hot dispatch, made of A and the ids alone)
            lowered(ops=SHARDY + ("stablehlo.all_gather",),
                    collectives=[written("all_gather", "X", carries=(), computed_from=(A, B))]),
            lowered(ops=SHARDY + ("stablehlo.all_gather",), collectives=[written("all_gather", "Y", carries=(A,))]),
            ("must call jax.lax.all_gather over X inside its shard_map, but its jax.lax.all_gather runs over Y "
             "only",)),
    Example("carrying the experts", GATHERS, lowered(ops=SHARDY + ("stablehlo.all_gather",),
                                                      collectives=[written("all_gather", "X", carries=(A,))]),
            lowered(ops=SHARDY + ("stablehlo.all_gather",), collectives=[written("all_gather", "X", carries=(W,))]),
            ("must send the tokens (A) over X with jax.lax.all_gather inside its shard_map, but no "
             "jax.lax.all_gather over X carries them: what they carry is W",)),
    Example("a product of the tokens and the experts", GATHERS,
            lowered(ops=SHARDY + ("stablehlo.all_gather",), collectives=[written("all_gather", "X", carries=(A,))]),
            lowered(ops=SHARDY + ("stablehlo.all_gather",),
                    collectives=[written("all_gather", "X", carries=(), computed_from=(W, A))]),
            ("what they carry is no input as it is",)),
    Example("a number made from the tokens", GATHERS,
            lowered(ops=SHARDY + ("stablehlo.all_gather",), collectives=[written("all_gather", "X", carries=(A,))]),
            lowered(ops=SHARDY + ("stablehlo.all_gather",),
                    collectives=[written("all_gather", "X", carries=(A,), in_rows=False)]),
            ("no jax.lax.all_gather over X carries them",)),
    Example("the tokens also sent beside it", GATHERS,
            lowered(ops=SHARDY + ("stablehlo.all_gather",),
                    collectives=[written("all_gather", "X", carries=(A,)), written("collective_permute", "Y", (A,))]),
            lowered(ops=SHARDY + ("stablehlo.all_gather",),
                    collectives=[written("all_gather", "X", carries=(A,)),
                                 written("collective_permute", "X", carries=(), computed_from=(A, B))]),
            ("its jax.lax.ppermute over X carries them too",)),
    Example("an all_to_all's absence is the compiled rule's to name", WritesCollective("all_to_all", over="X", of="A"),
            lowered(collectives=[written("all_to_all", "Y", carries=(A,))]),
            lowered(ops=SHARDY + ("stablehlo.all_to_all",), collectives=[written("all_to_all", "X", carries=(W,))]),
            ("no jax.lax.all_to_all over X carries them: what they carry is W",
             "Send the tokens themselves to their experts' rows")),
    Example("a psum over any axis", WritesCollective("all_reduce"),
            lowered(ops=SHARDY + ("stablehlo.all_reduce",), collectives=[written("all_reduce", "Y", (A,))]),
            lowered(), ("must communicate with jax.lax.psum inside its shard_map, but the program calls none",)),
    Example("not judged where a shard_map cannot show", GATHERS, lowered(collectives=[]), case=ONE_ROW),
)


# --- collectives: S006, the collectives built from ppermute alone (read from the lowered program) ---
from assignments.style_rules import ByHand  # noqa: E402

PERMUTES = SHARDY + ("stablehlo.collective_permute",)
example(
    Example("a psum beside the permutes", ByHand(), lowered(ops=PERMUTES),
            lowered(ops=PERMUTES + ("stablehlo.all_reduce",)),
            ("moe_all_to_all must build its collective from jax.lax.ppermute alone, but its program calls "
             "jax.lax.psum", "a psum over an axis of one device compiles to nothing, and still counts"),
            absent=("jax.lax.all_gather",)),
    Example("on a mesh whose axis has one device (the compiler drops it, the lowered program keeps it)", ByHand(),
            lowered(ops=SHARDY), lowered(ops=SHARDY + ("stablehlo.reduce_scatter", "stablehlo.all_to_all")),
            ("calls jax.lax.psum_scatter, jax.lax.all_to_all",), case=ONE_COLUMN),
    Example("a gather allowed when the part builds with it", ByHand(allowed=("collective_permute", "all_gather")),
            lowered(ops=PERMUTES + ("stablehlo.all_gather",)), lowered(ops=PERMUTES + ("stablehlo.all_gather",
                                                                                      "stablehlo.all_reduce")),
            ("from jax.lax.ppermute and jax.lax.all_gather alone, but its program calls jax.lax.psum",)),
)


# Hints: advice on a case whose values are wrong, never a failure of their own.
def _roll_of_the_whole_array(*args, **kwargs):
    """A mistake's reference, as a contract names it (`ValuesHint.when`)."""


def wrong(analysis=None, far_off=True, mistake=None) -> WrongValues:
    return WrongValues(analysis, far_off, lambda reference: reference is mistake)


ONE_WAY = compiled(permute("Y", HALF, shifts=(1,), count=3), permute("X", HALF, shifts=(1,), group=2)).analysis


@dataclasses.dataclass(frozen=True)
class HintExample:
    """A hint, wrong values it advises on, and (unless it advises on any) wrong values it does not."""

    name: str
    hint: Hint
    advised: WrongValues
    """Wrong values the hint fits."""
    unadvised: WrongValues | None
    """Wrong values it says nothing on (None: a hint given on any wrong values)."""
    says: tuple[str, ...]


HINTS: dict[str, list[HintExample]] = {}
for item in (
    HintExample("on any wrong values", ValuesHint("Reduce the shift modulo the shard's rows."), wrong(far_off=False),
                None, ("Reduce the shift modulo the shard's rows.",)),
    HintExample("only on that mistake's values", ValuesHint("Roll within the shard.", when=_roll_of_the_whole_array),
                wrong(mistake=_roll_of_the_whole_array), wrong(mistake=None), ("Roll within the shard.",)),
    HintExample("values off by whole blocks", RingDirections(), wrong(ONE_WAY, far_off=True),
                wrong(ONE_WAY, far_off=False),
                ("The program's collective-permutes over Y go +1 (device j sends to j+1) x3: after s steps of +1 a "
                 "device holds what device idx - s started with",)),
    HintExample("no program to read", RingDirections(), wrong(ONE_WAY), wrong(None), ("go +1",)),
):
    HINTS.setdefault(item.hint.code, []).append(item)


# --- training (C014 BlocksMoved, C015 QuietAxis, C016 GathersStoredArguments, W005 RingOrGatheredProducts) ---
from assignments.rules import BlocksMoved, GathersStoredArguments, QuietAxis, RingOrGatheredProducts  # noqa: E402

BLOCK = arr(4, 2)                                   # one [B/nX, D/nY] block: 8 elements
TWO_RINGS = BlocksMoved("Y", block=lambda s: 8, blocks=lambda s: 2 * (s["nY"] - 1), what="2(nY-1)")
"""A backward pass's Y traffic on `CASE` (nY = 4): 6 blocks, by permutes or an all-gather of one block."""
example(
    Example("two rings, or a ring and a gather", TWO_RINGS,
            compiled(permute("Y", BLOCK, count=3), permute("Y", BLOCK, count=3, shifts=(3,))),
            compiled(permute("Y", BLOCK, count=3), coll("all-gather", "Y", BLOCK, results=(arr(4, 8),)),
                     permute("Y", BLOCK, count=3)),
            ("over Y, 9 block(s) move per device (a permute moves one, an all-gather over 4 devices 3); allowed: "
             "exactly 6 (2(nY-1))",)),
    Example("the gather keeps it", TWO_RINGS,
            compiled(permute("Y", BLOCK, count=3), coll("all-gather", "Y", BLOCK, results=(arr(4, 8),)))),
    Example("another operand's blocks", TWO_RINGS, compiled(permute("Y", BLOCK, count=6)),
            compiled(permute("Y", BLOCK, count=3), coll("all-gather", "Y", arr(4, 4), results=(arr(4, 16),))),
            ("over Y, collectives of the wrong size: all-gather over Y of f32[4,4] (64 bytes) x1; allowed: one "
             "block of 8 elements per device each",)),
    Example("a sum over Y", TWO_RINGS, compiled(permute("Y", BLOCK, count=6)),
            compiled(permute("Y", BLOCK, count=6), coll("all-reduce", "Y", BLOCK)),
            ("over Y: all-reduce over Y of f32[4,2] (32 bytes) x1; allowed: collective-permutes and all-gathers",)),
    Example("uncounted loop", TWO_RINGS, compiled(permute("Y", BLOCK, count=6)),
            compiled(permute("Y", BLOCK, count=None)),
            ("runs inside a loop whose trip count is not known at compile time",)),
    Example("Y of one device moves nothing", TWO_RINGS, compiled(coll("all-reduce", "X", arr(8, 2), group=8)),
            compiled(permute("Y", BLOCK, count=1, group=1)), ("allowed: exactly 0",), case=ONE_COLUMN),
)

QUIET_Y = QuietAxis("Y", why="Nothing varies over Y.")
example(
    Example("anything over Y", QUIET_Y, compiled(coll("all-gather", "X", TOKENS, group=2)),
            compiled(coll("all-gather", "X", TOKENS, group=2), permute("XY", TOKENS, group=8)),
            ("communication over Y: collective-permute over X+Y of f32[4,8] (128 bytes) x1; allowed: none over Y. "
             "Nothing varies over Y.",), absent=("all-gather",)),
)

WEIGHTS = GathersStoredArguments("X", (0, 1), ("W1", "W2"))
example(
    Example("a computed value gathered", WEIGHTS,
            compiled(coll("all-gather", "X", TOKENS, group=2, sources=(0,), matmul_needs=(0.0,)),
                     coll("all-gather", "X", TOKENS, group=2, sources=(1,), matmul_needs=(0.0,)),
                     coll("reduce-scatter", "X", TOKENS, group=2, sources=(0, 1, 2), matmul_needs=(99.0,))),
            compiled(coll("all-gather", "X", arr(2, 8), group=2, sources=(0, 1, 2, 3), matmul_needs=(64.0,))),
            ("all-gather over X of a value that is not a stored W1 or W2: all-gather over X of f32[2,8]",)),
    Example("the batch gathered", WEIGHTS, compiled(coll("all-gather", "Y", TOKENS, sources=(2,))),
            compiled(coll("all-gather", "X", TOKENS, group=2, sources=(2,), matmul_needs=(0.0,))),
            ("all-gather over X of a value that is not a stored W1 or W2",)),
)

PRODUCTS = RingOrGatheredProducts("Y", flops=lambda s: 64, blocks=2, gathered=lambda s: 256, gathered_blocks=1,
                                  what="2 block products")
BACKWARD_STEP = Stage((sends(0, reads=(0,)), matmul(64, reads=(1,)), matmul(64, reads=(1,))), runs=3,
                      loop="while.7", carried=((0,), (1,)))
"""A backward ring's loop: dA's term and dW's block beside the one permute that carries dA."""
GATHER_A = coll("all-gather", "Y", BLOCK, results=(arr(4, 8),))
example(
    Example("two products a step", PRODUCTS, ring((P0,), BACKWARD_STEP, Stage((matmul(64),))),
            ring((P0,), Stage((sends(0), matmul(192)), runs=3, loop="while.4")),
            ("one run of the ring's loop does 192 FLOPs of matmuls per device beside its 1 permute(s) over Y "
             "(3 block products); allowed: at most 2 block products per permute (128)",)),
    Example("the gathered operand's product", PRODUCTS,
            ring((P0, GATHER_A), LOOPED, Stage((sends(1), matmul(256, after=(0,)), matmul(64))),),
            ring((P0, GATHER_A), Stage((sends(0), sends(1, after=(0,)))),
                 Stage((sends(1), matmul(256, after=(0,)), matmul(256)))),
            ("the program does 512 FLOPs of matmuls per device where no permute over Y runs beside them (8 block "
             "products); allowed: at most 320 (A gathered over Y: its product, and 1 block products",)),
    Example("a ring that only moves data", PRODUCTS, ring((P0, P1), UNROLLED),
            ring((P0, P1, P2), AFTER_THE_RING), ("allowed: at most 128 (2 block products)",)),
    Example("uncounted loop", PRODUCTS, ring((P0,), LOOPED), ring((P0,), UNCOUNTED),
            ("the program multiplies inside a loop whose trip count is not known at compile time",)),
    Example("Y of one device is not judged", PRODUCTS, ring((P0,), UNCOUNTED, mesh=(8, 1)), case=ONE_COLUMN),
)


# ---------------------------------------------------------------------------------------
# The tests

def _ids(examples):
    return [f"{e.rule.code}-{e.name}" for e in examples]


ALL = [e for examples in EXAMPLES.values() for e in examples]


def test_every_rule_in_the_registry_has_examples_here():
    """Does every kind of rule (`RULES`) have an example here, one that breaks it unless it
    judges nothing ("nothing: ..."), and does every hint have its advice shown?"""
    assert set(EXAMPLES) | set(HINTS) == set(RULES)
    assert not set(EXAMPLES) & set(HINTS)
    assert all(issubclass(RULES[code], Hint) for code in HINTS)
    for code, examples in EXAMPLES.items():
        assert all(type(e.rule) is RULES[code] for e in examples), code
        if not RULES[code].checks.startswith("nothing"):
            assert any(e.breaks is not None for e in examples), f"{code}: no program here breaks it"


@pytest.mark.parametrize("e", ALL, ids=_ids(ALL))
def test_a_rule_passes_what_keeps_it_and_names_what_breaks_it(e: Example):
    """Does the program that keeps the rule pass, and the one that breaks it fail with messages
    naming what was observed (and not what is not to blame)? Does `Rule.check` give the same
    messages as typed records, each naming the rule's id, of a kind that fails the case?"""
    assert found(e.rule, e.keeps, e.case) == [] and e.rule.check(e.keeps, e.case) == []
    if e.breaks is None:
        return
    messages = found(e.rule, e.breaks, e.case)
    assert messages and all(isinstance(m, str) and m for m in messages)
    text = "\n".join(messages)
    for words in e.observed:
        assert words in text, f"{words!r} not in:\n{text}"
    for words in e.absent:
        assert words not in text, f"{words!r} in:\n{text}"
    records = e.rule.check(e.breaks, e.case)
    assert [p.message for p in records] == messages
    assert {p.rule for p in records} == {e.rule.code}
    assert all(p.kind in PROBLEM_KINDS and p.fails for p in records)


def test_check_names_each_rule_of_a_combination():
    """Do rules combined (`AllOf`) keep their own ids in `check`'s records, and does a rule that
    applies only on some meshes (`OnlyWhen`) keep its rule's id and say when it applies?"""
    both = AllOf((NoCommunication(), ACTIVATIONS))
    program = compiled(permute("Y", TOKENS), values=[Value("big", arr(16, 8), "copy")])
    assert [p.rule for p in both.check(program, CASE)] == ["C001", "M001"]
    rows = OnlyWhen(lambda s: s["nX"] >= 2, ACTIVATIONS, "on meshes with nX >= 2")
    [problem] = rows.check(program, CASE)
    assert problem.rule == "M001" and problem.message.endswith("(this rule applies on meshes with nX >= 2)")
    assert rows.check(program, ONE_ROW) == [] and rows.leaves() == (ACTIVATIONS,)


HINT_EXAMPLES = [h for hints in HINTS.values() for h in hints]


@pytest.mark.parametrize("h", HINT_EXAMPLES, ids=[f"{h.hint.code}-{h.name}" for h in HINT_EXAMPLES])
def test_a_hint_advises_where_it_fits_and_never_fails_a_case(h: HintExample):
    """Is a hint's advice given on the wrong values it fits, and only there, and does it find no
    problem of its own in any program?"""
    advice = h.hint.advice(h.advised)
    for words in h.says:
        assert words in advice, f"{words!r} not in {advice!r}"
    if h.unadvised is not None:
        assert h.hint.advice(h.unadvised) == ""
    heavy = compiled(permute("Y", TOKENS, shifts=(2,), count=None), values=[Value("big", arr(999, 999), "copy")])
    assert h.hint.violations(heavy.analysis, CASE) == [] and h.hint.check(heavy, CASE) == []


def test_the_ring_hint_leaves_out_rings_of_two():
    """Does the ring hint say nothing of a ring of two, whose one neighbour is both ways?"""
    two = compiled(permute("Y", HALF, shifts=(1,), group=2)).analysis
    assert RingDirections().advice(wrong(two)) == ""


def test_keeps_on_axis_reads_collectives_in_pieces_of_one_token_row():
    """Is what a collective carries read in pieces of one row of the tokens per device? A[S, D]
    at P('X', 'Y') on a 2x4 mesh holds D/nY = 2 of each token's columns."""
    program = lowered(collectives=[TOKENS_OUT])
    assert EXPERTS_STAY.problems(program, CASE) == []
    assert program.lowered.asked == [((2, 4), 2)]
