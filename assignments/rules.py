"""Communication rules: what a graded function's compiled program may communicate.

A rule looks at the `ProgramAnalysis` of one compiled case (and, for rules that depend on
the data, such as a routing, the case's input arrays) and lists what breaks it, each message
naming what was observed against what is allowed. Rules compose with
`AllOf`; sizes are numbers or functions of the case's sizes (a dict with the problem's
sizes plus ``nX`` and ``nY``), e.g. ``lambda s: s["B"] // s["nX"] * s["D"] // s["nY"]``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar, Union

import numpy as np

from .contract import MESH_AXES, Problem
from .hlo import Collective, ProgramAnalysis, bytes_sent
from .lowered import LoweredProgram
from .steps import MAX_EVENTS, event_needs

Size = Union[int, Callable[[dict], int]]


class Rule:
    """One rule a graded function's program must keep: what it checks, why, and how it is
    measured, behind one small interface.

    Each kind of rule has an id (`code`, e.g. "C001") and a name (`title`, "no-communication"),
    says what it checks (`checks`), why that matters (`rationale`) and how it is measured (its
    docstring),
    and is listed, with every part that uses it, by `python -m assignments.rules`; `explain(code)`
    prints the same in a notebook. A part declares its rules in one list (`Part.rules`), and
    each rule there lists what breaks it on one compiled case: `problems(program, case)`.
    A rule of the compiled program's communication, memory or work reads its `ProgramAnalysis`
    (`violations(analysis, case, inputs)`); a style rule reads the lowered program
    (`assignments.style_rules`). Combinators (`AllOf`, `OnlyWhen`) have no code of their own.
    """

    code: ClassVar[str] = ""
    title: ClassVar[str] = ""
    checks: ClassVar[str] = ""
    """What it checks, in a line a student reads ("the compiled program holds no collective at all")."""
    rationale: ClassVar[str] = ""
    """Why that matters: the text `explain(code)` teaches with."""
    reads_lowered: ClassVar[bool] = False
    """A style rule, read from the lowered program (`assignments.style_rules`), not the compiled one."""
    problem_kind: ClassVar[str] = "communication"
    """The kind of the problems it finds (`assignments.contract.PROBLEM_KINDS`): "communication"
    for the rules on the compiled program's communication, memory and work."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code:
            if code in RULES and RULES[code] is not cls:
                raise TypeError(f"rule code {code} is taken by {RULES[code].__name__}")
            RULES[code] = cls

    def describe(self) -> str:
        raise NotImplementedError

    def violations(self, analysis, case, inputs=()) -> list[str]:
        raise NotImplementedError

    def problems(self, program, case) -> list[str]:
        """What breaks this rule on one compiled case (`program`: an `assignments.style_rules.Program`)."""
        return self.violations(program.analysis, case, program.inputs)

    def check(self, program, case) -> list[Problem]:
        """`problems` as typed records, each naming this rule's id (a combinator's, its rules')."""
        return [Problem(self.code, message, self.problem_kind) for message in self.problems(program, case)]

    def leaves(self) -> tuple["Rule", ...]:
        """The rules this one is made of (itself, for a rule with a code)."""
        return (self,)


RULES: dict[str, type[Rule]] = {}
"""Every kind of rule by its code, filled as rule classes are defined (`Rule.__init_subclass__`)."""


@dataclasses.dataclass(frozen=True)
class Program:
    """What a part's rules read of one compiled case."""

    part: object
    """The graded function's `Part` (messages name it)."""
    analysis: ProgramAnalysis | None
    """The compiled program's collectives, values, memory and matmul work (`assignments.hlo`);
    None where only the style rules run (they read `lowered`)."""
    lowered: LoweredProgram | None = None
    """The lowered (StableHLO) program, before XLA partitions and optimizes it, parsed once
    (`assignments.lowered.lowered_program`): what the style rules read."""
    inputs: tuple = ()
    """The case's input arrays, for the rules that depend on the data (a routing)."""


def _size(size: Size, case) -> int:
    return size(case.all_sizes) if callable(size) else int(size)


def axes_label(c: Collective) -> str:
    """The mesh axes a collective acts over, as messages name them ("X", "X+Y", "no axis")."""
    return "+".join(c.axes) or "no axis"


def collective_label(c: Collective) -> str:
    """A collective as messages name it, before its details ("all-gather over X"): the class
    report (`graders.class_results`) finds collectives in messages by this."""
    return f"{c.kind} over {axes_label(c)}"


def describe_collective(c: Collective) -> str:
    times = "an unknown number of times" if c.count is None else f"x{c.count}"
    return f"{collective_label(c)} of {c.shape} ({c.bytes:,} bytes) {times}"


def _observed(collectives) -> str:
    return "; ".join(describe_collective(c) for c in collectives) or "none"


def _in_an_uncounted_loop(subject: str, what: str, collectives, allowed: str = "") -> str:
    """The message for collectives run in a loop whose trip count XLA could not read: `what`
    cannot be counted, against what is `allowed`, and the advice."""
    return (f"{subject} runs inside a loop whose trip count is not known at compile time, so {what} cannot be "
            f"counted (observed: {_observed(collectives)})" + (f"; allowed: {allowed}" if allowed else "")
            + ". Use a loop with static bounds (jax.lax.fori_loop with Python ints)")


def _packed(collectives) -> str:
    """For sizes judged by bytes: a note when a collective's type is wider than float32."""
    wide = [c for c in collectives if c.size != c.elements]
    if not wide:
        return ""
    return (f" (a collective of a type wider than float32 counts by its bytes: "
            f"{wide[0].shape} is as large as {wide[0].size:,} float32 values)")


def _over(c: Collective, axes: tuple[str, ...] | None) -> bool:
    return axes is None or any(a in c.axes for a in axes)


@dataclasses.dataclass(frozen=True)
class NoCommunication(Rule):
    """The compiled program must contain no collective at all. `why` says why none is
    needed; `to_try`, what to change in code that communicates anyway."""

    code: ClassVar[str] = "C001"
    title: ClassVar[str] = "no-communication"
    checks: ClassVar[str] = "the compiled program holds no collective at all"
    rationale: ClassVar[str] = (
        "Every collective costs link time the book's cost model counts; where each output element depends "
        "only on what a device holds, a program that moves data is slower for nothing, and usually "
        "computes the wrong thing (a roll of the whole array moves rows across shards).")

    why: str = ""
    to_try: str = ""

    def describe(self) -> str:
        return "no communication"

    def violations(self, analysis: ProgramAnalysis, case, inputs=()) -> list[str]:
        if not analysis.collectives:
            return []
        advice = " ".join(text for text in (self.why, self.to_try and f"Try: {self.to_try}") if text)
        return [f"communication observed: {_observed(analysis.collectives)}; allowed: none"
                + (f". {advice}" if advice else "")]


@dataclasses.dataclass(frozen=True)
class AnyCommunication(Rule):
    """No rule on communication (reported, not judged)."""

    code: ClassVar[str] = "C002"
    title: ClassVar[str] = "any-communication"
    checks: ClassVar[str] = "nothing: the program's communication is shown, not judged"
    rationale: ClassVar[str] = (
        "Some parts teach what XLA inserts on its own (jax.jit on sharded inputs): their communication is "
        "shown, not judged.")

    def describe(self) -> str:
        return "any (reported, not judged)"

    def violations(self, analysis: ProgramAnalysis, case, inputs=()) -> list[str]:
        return []


@dataclasses.dataclass(frozen=True)
class OnlyKinds(Rule):
    """Every collective must be one of `kinds`."""

    code: ClassVar[str] = "C003"
    title: ClassVar[str] = "only-these-collectives"
    checks: ClassVar[str] = "every collective of the compiled program is one of the kinds allowed"
    rationale: ClassVar[str] = (
        "A design is named by the collectives it uses (a ring of permutes, not an all-gather): any other "
        "kind means the schedule the problem asks for was not written.")

    kinds: tuple[str, ...]
    why: str = ""

    def describe(self) -> str:
        return f"only {', '.join(self.kinds)}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        bad = [c for c in analysis.collectives if c.kind not in self.kinds]
        if not bad:
            return []
        hint = f". {self.why}" if self.why else ""
        return [f"communication observed: {_observed(bad)}; allowed: only {', '.join(self.kinds)}{hint}"]


@dataclasses.dataclass(frozen=True)
class Forbid(Rule):
    """No collective of `kind` (over any of `axes`, when given)."""

    code: ClassVar[str] = "C004"
    title: ClassVar[str] = "forbidden-collective"
    checks: ClassVar[str] = "no collective of the kind named (over the axes named) runs"
    rationale: ClassVar[str] = (
        "The collective named is the one the design exists to avoid (an all-gather of a whole weight, of "
        "the tokens): finding it means the work the problem teaches was left to XLA or done the costly "
        "way.")

    kind: str
    axes: tuple[str, ...] | None = None
    why: str = ""
    dtypes: tuple[str, ...] | None = None
    """Only collectives of these element types (HLO prefixes: ``("f", "bf")`` for floats),
    so that two `Forbid`s can say different things about, say, tokens and integer ids."""

    def describe(self) -> str:
        over = f" over {'/'.join(self.axes)}" if self.axes else ""
        return f"no {self.kind}{over}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        # An all-to-all whose blocks are all copies of one value gathers it (`Collective.copies`).
        bad = [c for c in analysis.collectives if (c.kind == self.kind or (self.kind == "all-gather" and c.copies))
               and _over(c, self.axes)
               and (self.dtypes is None or any(o.dtype.startswith(self.dtypes) for o in c.operands))]
        if not bad:
            return []
        hint = f". {self.why}" if self.why else ""
        disguised = (" (an all-to-all whose blocks are all copies of one value sends every device that value, "
                     "as an all-gather does, and counts as one)" if any(c.kind != self.kind for c in bad) else "")
        return [f"communication observed: {_observed(bad)}{disguised}; allowed: {self.describe()}{hint}"]


@dataclasses.dataclass(frozen=True)
class Exactly(Rule):
    """Exactly `count` runs of `kind` (loop trip counts included), each of `elements`
    elements per device when given, over `axes` when given."""

    code: ClassVar[str] = "C005"
    title: ClassVar[str] = "exact-collectives"
    checks: ClassVar[str] = "the collective named runs exactly as often as the design needs, with operands of the stated size"
    rationale: ClassVar[str] = (
        "The book's design has a known number of collectives of a known size (one psum of M elements, "
        "nY-1 permutes of one block): more runs or bigger operands cost time that the design does not "
        "spend.")

    kind: str
    count: Size
    elements: Size | None = None
    axes: tuple[str, ...] | None = None
    what: str = ""
    """How many, and of what size, in the problem's symbols ("nY-1, each of (B/nX)*(D/nY) elements")."""

    def describe(self) -> str:
        over = f" over {'/'.join(self.axes)}" if self.axes else ""
        size = "" if self.elements is None else ", each of the stated size"
        return f"{self.kind}s{over}: exactly {self.what or 'the stated number' + size}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        want = _size(self.count, case)
        found = [c for c in analysis.of_kind(self.kind) if _over(c, self.axes)]
        problems = []
        over = f" over {'/'.join(self.axes)}" if self.axes else ""
        got = sum(c.count or 0 for c in found)
        if any(c.count is None for c in found):
            problems.append(_in_an_uncounted_loop(f"the {self.kind}{over}", "how often it runs", found,
                                                  f"exactly {want}"))
        elif got != want and not found:
            others = _observed(analysis.collectives)
            seen = f"the program's collectives: {others}" if analysis.collectives else \
                "the program communicates nothing"
            problems.append(f"no {self.kind}{over} in the program ({seen}); allowed: exactly {want}")
        elif got != want:
            problems.append(f"{self.kind}{over} runs {got} time(s); allowed: exactly {want} "
                            f"(observed: {_observed(found)})")
        if self.elements is not None:
            size = _size(self.elements, case)
            wrong = [c for c in found if c.size != size]
            if wrong:
                problems.append(f"{self.kind} of the wrong size: {_observed(wrong)}; allowed: "
                                f"{size:,} elements per device each{_packed(wrong)}")
        return problems


@dataclasses.dataclass(frozen=True)
class MaxTotalBytes(Rule):
    """Bytes sent per device over a whole run, summed over every collective, at most `limit`.

    With `ring`, each collective counts the bytes a ring algorithm puts on the links
    (`Collective.ring_bytes`: an all-reduce of V bytes costs 2(n-1)/n V), so that a native
    all-reduce and a ring of permutes are measured alike."""

    code: ClassVar[str] = "C006"
    title: ClassVar[str] = "bytes-per-device"
    checks: ClassVar[str] = "the bytes each device sends over a whole run, summed over its collectives, stay within the bound"
    rationale: ClassVar[str] = (
        "Link time is bytes over bandwidth: a design that sends more bytes than the minimum is slower in "
        "proportion, however its collectives are spelled.")

    limit: Size
    what: str = "the minimum"
    ring: bool = False
    kinds: tuple[str, ...] | None = None
    """Only collectives of these kinds count (the others being another rule's to report)."""

    def describe(self) -> str:
        return f"bytes sent per device: at most {self.what}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        limit = _size(self.limit, case)
        counted = [c for c in analysis.collectives if self.kinds is None or c.kind in self.kinds]
        total = bytes_sent(counted, ring=self.ring)
        if total is None:
            return [f"cannot bound the bytes sent: a collective runs inside a loop with no "
                    f"compile-time trip count (observed: {_observed(counted)})"]
        total = int(round(total))
        if total > limit:
            return [f"sends {total:,} bytes per device; allowed: at most {limit:,} ({self.what}). "
                    f"Observed: {_observed(counted)}"]
        return []


@dataclasses.dataclass(frozen=True)
class NoValueAtLeast(Rule):
    """No activation (a value computed outside fusions from a floating-point argument) with
    `elements` or more elements per device: bookkeeping computed from integer arguments alone
    never counts (`Value.bookkeeping`). The message describes each value by its shape and the
    arguments it is computed from (`arguments`: their names in order), never by XLA's names."""

    code: ClassVar[str] = "M001"
    title: ClassVar[str] = "no-large-value"
    checks: ClassVar[str] = "no value the program computes is as large as the one the design avoids"
    rationale: ClassVar[str] = (
        "A value as large as the one the design avoids (a dense [S, D, F] buffer, a whole gathered "
        "matrix) costs the memory, and usually the time, that the design exists to save.")

    limits_memory: ClassVar[bool] = True
    """A memory rule: the visible check labels it "rule", not "allowed communication"."""
    elements: Size
    what: str
    why: str = ""
    """What to do instead, appended to the message."""
    arguments: tuple[str, ...] = ()
    """The program's arguments' names, in order (without them a message says "argument 2")."""

    def describe(self) -> str:
        return f"no value as large as {self.what}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        limit = _size(self.elements, case)
        big = analysis.values_at_least(limit)
        if not big:
            return []
        seen = ", ".join(v.describe(self.arguments) for v in big[:3])
        hint = f". {self.why}" if self.why else ""
        return [f"the program computes {seen}; allowed: no value with {limit:,} or more elements "
                f"({self.what}){hint}"]


@dataclasses.dataclass(frozen=True)
class OnlyWhen(Rule):
    """`rule` applies only to cases where `applies(sizes)` is true (sizes: the case's sizes
    plus ``nX`` and ``nY``), e.g. only on meshes with two or more devices along X."""

    applies: Callable[[dict], bool]
    rule: object
    condition: str
    """The condition in words, e.g. ``"on meshes with nX >= 2"``."""

    def describe(self) -> str:
        return f"{self.rule.describe()} ({self.condition})"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if not self.applies(case.all_sizes):
            return []
        return [f"{v} (this rule applies {self.condition})"
                for v in self.rule.violations(analysis, case, inputs)]

    def check(self, program, case) -> list[Problem]:
        if not self.applies(case.all_sizes):
            return []
        return [dataclasses.replace(p, message=f"{p.message} (this rule applies {self.condition})")
                for p in self.rule.check(program, case)]

    def leaves(self) -> tuple[Rule, ...]:
        return self.rule.leaves()


UNEVEN = 0.9
"""The largest share of the result one piece of a split reduction may carry: halves, uneven
tiles (`np.array_split`) and tiles of a fixed size (8 columns of F=10: 80%) pass; a split of
F-1 columns and 1 overlaps nothing (97% of F=32)."""


@dataclasses.dataclass(frozen=True)
class SplitReduction(Rule):
    """The reduction over `axis` runs in at least `pieces` pieces (separate all-reduces or
    reduce-scatters, operands of one combined all-reduce, or any collective-permute ring), so its
    communication can overlap the matmuls that produce the later pieces. With `whole` (the
    elements of the reduced result per device), no all-reduce or reduce-scatter operand, and no
    all-to-all, may carry the whole result: a ring beside it would be a decoy, not the reduction."""

    code: ClassVar[str] = "C007"
    title: ClassVar[str] = "split-reduction"
    checks: ClassVar[str] = "the reduction runs in pieces, none carrying nearly the whole result, so each can overlap a matmul"
    rationale: ClassVar[str] = (
        "A reduction done in one piece after the whole matmul overlaps nothing; in pieces, each piece's "
        "communication runs while the next piece is multiplied (the book's collective matmul).")

    axis: str
    pieces: int = 2
    whole: Size | None = None

    def describe(self) -> str:
        return f"the reduction over {self.axis} split into at least {self.pieces} pieces"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if case.all_sizes[f"n{self.axis}"] < 2:
            return []  # nothing to reduce over a one-device axis
        reductions = [c for c in analysis.collectives if self.axis in c.axes]
        whole = None if self.whole is None else _size(self.whole, case)
        unsplit = [c for c in reductions if whole is not None and _reduces_whole(c, whole)]
        if unsplit:
            return [f"the reduction over {self.axis} runs in one piece: {_observed(unsplit)} reduces the "
                    f"whole result ({whole:,} elements per device) at once; allowed: at least "
                    f"{self.pieces} pieces, none of them the whole result. Tile the output dimension and "
                    f"reduce each tile separately (one psum per tile, or a ring of collective-permutes), "
                    f"so a tile's communication can overlap the next tile's matmul"]
        if whole is not None:
            largest = max((o.size for c in reductions if c.kind in ("all-reduce", "reduce-scatter")
                           for o in c.operands), default=0)
            if largest > UNEVEN * whole:
                return [f"the reduction over {self.axis} is split unevenly: one piece carries {largest:,} of the "
                        f"result's {whole:,} elements per device ({_observed(reductions)}); allowed: no piece "
                        f"above {UNEVEN:.0%} of the result, so that most of the communication can overlap a "
                        f"matmul. Tile the output dimension into pieces of about equal size"]
        if any(c.kind == "collective-permute" for c in reductions):
            return []
        # A reduce-scatter reduces too (scatter-then-gather is an all-reduce in two steps), and so
        # does an all-to-all whose pieces each device adds up (one piece per all-to-all run).
        pieces = sum(c.pieces * (c.count or 1) for c in reductions if c.kind in ("all-reduce", "reduce-scatter"))
        pieces += sum(c.count or 1 for c in reductions if c.kind == "all-to-all")
        if pieces >= self.pieces:
            return []
        uncounted = [c for c in reductions if c.count is None and c.kind in ("all-reduce", "reduce-scatter", "all-to-all")]
        if uncounted:
            return [_in_an_uncounted_loop(f"the reduction over {self.axis}", "its pieces", uncounted,
                                          f"at least {self.pieces} pieces")]
        if not pieces:
            return [self._missing(analysis)]
        return [f"the reduction over {self.axis} runs as {pieces} piece(s) ({_observed(reductions)}); "
                f"allowed: at least {self.pieces}. Tile the output dimension and reduce each tile "
                f"separately (one psum per tile), so a tile's communication can overlap the next "
                f"tile's matmul"]

    def _missing(self, analysis) -> str:
        """Nothing reduces over the axis: the partial sums were added over another axis, or not at all."""
        elsewhere = [c for c in analysis.collectives if c.kind in ("all-reduce", "reduce-scatter")]
        if elsewhere:
            axes = " and ".join(sorted({"+".join(c.axes) for c in elsewhere}))
            return (f"nothing is reduced over {self.axis}: the program reduces over {axes} instead "
                    f"({_observed(elsewhere)}); allowed: the partial sums added over {self.axis}, in at "
                    f"least {self.pieces} pieces. The contracting dimension is split over {self.axis}, "
                    f"so that is the axis to sum over: check the axis name your psum is given")
        return (f"nothing is reduced over {self.axis} (observed: {_observed(analysis.collectives)}); "
                f"allowed: the partial sums added over {self.axis} (psum over '{self.axis}'), in at least "
                f"{self.pieces} pieces: each device holds only its share of the contracting dimension")


def _reduces_whole(c: Collective, whole: int) -> bool:
    """Does one run of `c` carry a whole result of `whole` elements to be added up: an
    all-reduce or reduce-scatter operand that size, or an all-to-all whose operands (XLA:CPU
    gives it one per device of the group) make it up together?"""
    if c.kind in ("all-reduce", "reduce-scatter"):
        return any(o.size >= whole for o in c.operands)
    return c.kind == "all-to-all" and c.size >= whole


@dataclasses.dataclass(frozen=True)
class BothDirections(Rule):
    """The collective-permutes over `axis` go both ways around the ring (on rings of 3 or
    more devices; on 2 devices the one neighbour is both ways)."""

    code: ClassVar[str] = "R001"
    title: ClassVar[str] = "both-ring-directions"
    checks: ClassVar[str] = "the ring's permutes go both ways around the ring"
    rationale: ClassVar[str] = (
        "A ring that sends one way uses half of each link's bandwidth; sending half of each block each "
        "way halves the time per step (the book's bidirectional collective matmul).")

    axis: str

    def describe(self) -> str:
        return f"collective-permutes over {self.axis} in both ring directions"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if case.all_sizes[f"n{self.axis}"] < 3:
            return []
        permutes = [c for c in analysis.of_kind("collective-permute") if self.axis in c.axes]
        ways = {(d > 0) - (d < 0) for c in permutes for d in c.directions}
        if {1, -1} <= ways:
            return []
        seen = sorted({f"{d:+d}" for c in permutes for d in c.directions})
        observed = (f"collective-permutes over {self.axis} go {', '.join(seen)} only" if seen
                    else f"no collective-permute over {self.axis}")
        return [f"{observed}; allowed: both ring "
                f"directions (+1 and -1), each carrying half the data, so that both directions of "
                f"every link work at once"]


@dataclasses.dataclass(frozen=True)
class NeighbourSteps(Rule):
    """Every collective-permute over `axis` alone is one step of a ring: each device sends to
    a neighbour along `axis` (+1 or -1, wrapping round). A permute that jumps k devices crosses
    k links at once, as a direct send to the block's destination does: that is an all-gather
    or reduce-scatter spread over permutes, not a ring."""

    code: ClassVar[str] = "R002"
    title: ClassVar[str] = "neighbour-steps"
    checks: ClassVar[str] = "every permute of the ring sends to a neighbour (+1 or -1 along the axis)"
    rationale: ClassVar[str] = (
        "On a ring or a line of chips, a permute to a neighbour crosses one link; a jump of k devices "
        "crosses k links and costs k steps' time, which the ring's schedule does not have.")

    axis: str

    def describe(self) -> str:
        return f"collective-permutes over {self.axis} to a neighbour only (+1 or -1)"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        jumps = [c for c in analysis.of_kind("collective-permute")
                 if c.axes == (self.axis,) and any(d not in (1, -1) for d in c.directions)]
        if not jumps:
            return []
        seen = ", ".join(sorted({f"{d:+d}" for c in jumps for d in c.directions if d not in (1, -1)}))
        more = f" and {len(jumps) - 2} more" if len(jumps) > 2 else ""
        return [f"collective-permutes over {self.axis} that jump {seen} devices: {_observed(jumps[:2])}{more}; allowed: "
                f"steps to a neighbour only (+1 or -1 along {self.axis}, wrapping round). A ring passes each "
                f"block on over one link per step, and the next step carries it further; a jump of k devices "
                f"crosses k links at once"]


@dataclasses.dataclass(frozen=True)
class HalfBlocks(Rule):
    """Every collective-permute over `axis` carries half of a [rows, cols] block, split
    along either dimension: exactly half when that dimension is even, within one row or
    column of half when it is odd. What a bidirectional ring sends each way per step."""

    code: ClassVar[str] = "R003"
    title: ClassVar[str] = "half-blocks"
    checks: ClassVar[str] = "each permute of a bidirectional ring carries half of a block"
    rationale: ClassVar[str] = (
        "A bidirectional ring balances its links only when each direction carries half of what the "
        "one-way ring sends per step.")

    axis: str
    rows: Callable[[dict], int]
    cols: Callable[[dict], int]

    def describe(self) -> str:
        return f"each collective-permute over {self.axis} carries half a block"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        r, c = _size(self.rows, case), _size(self.cols, case)
        halves = ([r * (c // 2), r * -(-c // 2)] if c >= 2 else []) + \
                 ([(r // 2) * c, -(-r // 2) * c] if r >= 2 else [])
        low, high = min(halves, default=r * c), max(halves, default=r * c)
        wrong = [p for p in analysis.of_kind("collective-permute")
                 if self.axis in p.axes and not low <= p.size <= high]
        if not wrong:
            return []
        allowed = f"{low:,}" if low == high else f"{low:,} to {high:,}"
        return [f"collective-permute of the wrong size: {_observed(wrong)}; allowed: {allowed} "
                f"elements each, half of a [{r}, {c}] block (within one row or column when the "
                f"block is odd), so that both directions carry the same load{_packed(wrong)}"]


def _step_of_ring(c: Collective, mesh_shape, axis_names, axis: str) -> dict[int, dict[int, float]]:
    """Bytes that one run of permute `c` sends each way along `axis`, per sending device
    ({device: {+1: .., -1: ..}}): each pair's direction (a step of n/2 on an even ring counts as
    +1, as `Collective.directions` does) carries the permute's bytes from its source. An
    analysis without pairs has one sender standing for all, its distinct directions sharing
    its bytes."""
    n = max(c.group_size, 1)
    if c.pairs and mesh_shape and axis in axis_names:
        i = list(axis_names).index(axis)
        sent: dict[int, dict[int, float]] = {}
        for s, t in c.pairs:
            way = 1 if (np.unravel_index(t, mesh_shape)[i] - np.unravel_index(s, mesh_shape)[i]) % n <= n // 2 else -1
            sent.setdefault(s, {1: 0.0, -1: 0.0})[way] += c.bytes
        return sent
    ways = [1 if d > 0 else -1 for d in c.directions]
    return {-1: {w: c.bytes * ways.count(w) / len(ways) for w in (1, -1)}} if ways else {}


def ring_steps(analysis: ProgramAnalysis, axis: str) -> list[tuple[str, list[list[tuple[Collective, int]]]]]:
    """The permutes over `axis` as the steps of ring phases: [(phase, [step, ...]), ...], each
    step a list of (permute, runs of it in the step).

    A phase is a loop body (one run of it) or straight-line code (`ProgramAnalysis.stages`);
    a permute's step is its place on the longest chain of permutes over `axis` it depends on
    within the phase, so the two halves that travel opposite ways in one step of a
    bidirectional ring share a step however the compiler ordered them, and two phases run
    one after the other stay apart. (An analysis without stages has no phases.)"""
    def ours(c):
        return c.kind == "collective-permute" and c.axes == (axis,)

    phases = []
    for stage in analysis.stages:
        depth: list[int] = []
        steps: dict[int, list[Collective]] = {}
        for e in stage.events:
            c = analysis.collectives[e.collective] if 0 <= e.collective < len(analysis.collectives) else None
            d = max((depth[a] for a in e.after if 0 <= a < len(depth)), default=0) + bool(c and ours(c))
            depth.append(d)
            if c is not None and ours(c):
                steps.setdefault(d, []).append((c, 1))
        if steps:
            where = "straight-line code" if stage.runs == 1 and not stage.loop else \
                f"a loop body run {stage.runs if stage.runs is not None else 'an unknown number of'} times"
            phases.append((where, [steps[d] for d in sorted(steps)]))
    return phases


@dataclasses.dataclass(frozen=True)
class BalancedDirections(Rule):
    """At every step of every ring phase (`ring_steps`), the collective-permutes over `axis`
    move the same bytes each way: exactly when a [rows, cols] block splits evenly, within
    one row or column when it is odd. A phase that sends everything one way runs at one-way
    speed however balanced the whole program is. Checked on rings of 3 or more devices, and
    only where both directions occur (`BothDirections` reports a one-way program)."""

    code: ClassVar[str] = "R004"
    title: ClassVar[str] = "balanced-directions"
    checks: ClassVar[str] = "every step of the ring moves the same bytes each way"
    rationale: ClassVar[str] = (
        "A step takes as long as its busiest direction: the same bytes each way at every step is what "
        "makes both directions pay.")

    axis: str
    rows: Callable[[dict], int]
    cols: Callable[[dict], int]

    def describe(self) -> str:
        return f"every ring step over {self.axis} moves the same bytes each way"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        permutes = [c for c in analysis.of_kind("collective-permute") if c.axes == (self.axis,)]
        if case.all_sizes[f"n{self.axis}"] < 3 or {d > 0 for c in permutes for d in c.directions} != {True, False}:
            return []
        if not analysis.stages:  # too many events to keep (steps.MAX_EVENTS): fail closed, never on totals
            return [f"the compiled program has too many collectives and matmuls (over {MAX_EVENTS:,}) for its "
                    f"ring steps to be checked one by one, so their balance cannot be shown: write the ring as a "
                    f"loop (`jax.lax.fori_loop`) rather than unrolling it, and drop work the result does not need"]
        r, c = _size(self.rows, case), _size(self.cols, case)
        slack = max(r if c % 2 else 0, c if r % 2 else 0)   # elements: one column or row of an odd block
        phases = ring_steps(analysis, self.axis)
        problems = []
        for p, (where, steps) in enumerate(phases, start=1):
            bad = []
            for k, step in enumerate(steps, start=1):
                # The permutes of one computation run together; those of different branches of a
                # conditional never do (a lax.cond choosing the direction each pass is one-way),
                # so each computation's permutes must balance on their own.
                size = max((o.bytes // max(o.elements, 1) for q, _ in step for o in q.operands), default=4)
                for computation in dict.fromkeys(permute.computation for permute, _ in step):
                    worst = self._worst_sender([(p, runs) for p, runs in step if p.computation == computation],
                                               analysis)
                    if abs(worst[1] - worst[-1]) > slack * size:
                        bad.append((k, worst))
                        break
            if bad:
                k, ways = bad[0]
                step = "" if len(steps) == 1 else f", step {k} of its {len(steps)}"
                more = f" (and {len(bad) - 1} more of its steps)" if len(bad) > 1 else ""
                within = (f"within one row or column of the odd [{r}, {c}] block, {slack * size:,} bytes" if slack
                          else f"the [{r}, {c}] block splits evenly")
                problems.append(
                    f"ring phase {p} of {len(phases)} ({where}){step}{more}: {ways[-1]:,.0f} bytes per device go "
                    f"-1 and {ways[1]:,.0f} go +1; allowed: the same bytes each way at every step ({within}), so "
                    f"that both directions of every link work at once. Send half of each block each way in "
                    f"this phase too")
        return problems

    def _worst_sender(self, permutes, analysis) -> dict[int, float]:
        """Bytes each way of the device whose two directions differ most over `permutes`: each
        device must send as much each way (devices that each send one way only, in turns,
        balance the total and still leave one direction of every link idle)."""
        senders: dict[int, dict[int, float]] = {}
        for permute, runs in permutes:
            for device, sent in _step_of_ring(permute, analysis.mesh_shape, analysis.axis_names, self.axis).items():
                mine = senders.setdefault(device, {1: 0.0, -1: 0.0})
                for w, b in sent.items():
                    mine[w] += b * runs
        return max(senders.values(), key=lambda ways: abs(ways[1] - ways[-1]), default={1: 0.0, -1: 0.0})


def ring_directions_note(analysis: ProgramAnalysis) -> str:
    """For a wrong result: which way the program's permutes moved data, and what each device
    then holds after s steps, so a ring walking the other way than its schedule assumes shows."""
    runs: dict[tuple[str, int], int] = {}
    for c in analysis.of_kind("collective-permute"):
        if len(c.axes) == 1 and c.group_size >= 3:   # on two devices both ways are the one neighbour
            for d in c.directions:
                runs[(c.axes[0], d)] = runs.get((c.axes[0], d), 0) + (c.count or 1)
    if not runs:
        return ""
    seen = ", ".join(f"{d:+d} (device j sends to j{d:+d}) x{n}" for (axis, d), n in sorted(runs.items()))
    axes = "/".join(sorted({axis for axis, _ in runs}))
    ways = {d > 0 for _, d in runs}
    holds = [f"after s steps of {d} a device holds what device idx {sign} s started with"
             for d, sign, way in (("-1", "+", False), ("+1", "-", True)) if way in ways]
    return (f"The program's collective-permutes over {axes} go {seen}: {'; '.join(holds)}. Check that "
            f"the block each step multiplies or adds is the one that direction brings")


class Hint(Rule):
    """Advice a contract attaches to a part for a case whose values come out wrong: the mistake
    such values usually mean, and where to look. Never a failure of its own (its problems are of
    kind "hint"), and given only where the contract declares it (a ring's hint on ring parts,
    never on a roll)."""

    problem_kind: ClassVar[str] = "hint"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        return []

    def advice(self, wrong: "WrongValues") -> str:
        """The hint for this case ("" when it does not fit what the program did)."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class WrongValues:
    """What a hint reads of a case whose values came out wrong."""

    analysis: ProgramAnalysis | None
    far_off: bool
    """Off by about as much as the values themselves (whole blocks in the wrong place), not by a
    rounding or a slightly different formula."""
    matches: Callable[[Callable], bool]
    """Does the result equal what this reference (same signature as the part's) computes on the
    case's inputs? (Is it exactly that mistake's result?)"""


@dataclasses.dataclass(frozen=True)
class ValuesHint(Hint):
    """On wrong values, `text`; with `when` (the reference of the mistake the text names), only
    when the result is exactly that mistake's, never on other wrong values."""

    code: ClassVar[str] = "H001"
    title: ClassVar[str] = "values-hint"
    checks: ClassVar[str] = "nothing: on wrong values, it names the mistake they usually mean and where to look"
    rationale: ClassVar[str] = (
        "Some wrong results have one usual cause (a roll built from slices that did not reduce its shift, a "
        "gradient summed where it should be averaged); saying so, only when the result is exactly that "
        "mistake's, saves a student the search without misleading the others.")

    text: str
    when: Callable | None = None

    def describe(self) -> str:
        return "on wrong values " + ("that are exactly a known mistake's: " if self.when else ": ") + \
            self.text.split(". ")[0]

    def advice(self, wrong: WrongValues) -> str:
        return self.text if self.when is None or wrong.matches(self.when) else ""


@dataclasses.dataclass(frozen=True)
class RingDirections(Hint):
    """On values off by whole blocks, which way the program's permutes moved data and what each
    device then holds after s steps (`ring_directions_note`)."""

    code: ClassVar[str] = "H002"
    title: ClassVar[str] = "ring-directions"
    checks: ClassVar[str] = ("nothing: on values off by whole blocks, it says which way the permutes went and "
                             "what each device holds after s steps")
    rationale: ClassVar[str] = (
        "A ring that walks the other way than its schedule assumes multiplies the wrong block at every step: "
        "the values come out off by whole blocks, and the direction of the permutes is the thing to check.")

    def describe(self) -> str:
        return "on values off by whole blocks: the directions the permutes went"

    def advice(self, wrong: WrongValues) -> str:
        return ring_directions_note(wrong.analysis) if wrong.far_off and wrong.analysis is not None else ""


@dataclasses.dataclass(frozen=True)
class ReducesOverAll(Rule):
    """The program's `kind` collectives run over every mesh axis of more than one device: the
    work was split over all of them (a reduction over X alone means only X split it)."""

    code: ClassVar[str] = "C008"
    title: ClassVar[str] = "reduces-over-every-axis"
    checks: ClassVar[str] = "the reduction runs over every mesh axis the work was split over"
    rationale: ClassVar[str] = (
        "Where the work is split over every mesh axis, each partial result must be combined over every "
        "axis; a reduction over fewer axes leaves devices with partial sums.")

    kind: str
    why: str = ""

    def describe(self) -> str:
        return f"the {self.kind} over every mesh axis of more than one device"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        sizes = dict(zip(MESH_AXES, case.mesh))
        need = {a for a, n in sizes.items() if n > 1}
        found = analysis.of_kind(self.kind)
        covered = {a for c in found for a in c.axes}
        missing = sorted(need - covered)
        if not missing:
            return []
        lacking = " and ".join(f"{a} ({sizes[a]} devices)" for a in missing)
        allowed = f"allowed: one over {' and '.join(sorted(need))}{'. ' + self.why if self.why else ''}"
        if not covered:
            seen = (f"the program's collectives: {_observed(analysis.collectives)}" if analysis.collectives
                    else "the program communicates nothing")
            return [f"the work is not split over {lacking}: no {self.kind} adds the devices' partial results "
                    f"({seen}); {allowed}"]
        split = " and ".join(sorted(covered))
        return [f"the work is split over {split} only, not over {lacking}: the {self.kind} that adds the "
                f"devices' partial results runs over {split} ({_observed(found)}); {allowed}"]


@dataclasses.dataclass(frozen=True)
class MaxMatmulFlops(Rule):
    """The program's matmuls do at most `flops` per device (`ProgramAnalysis.dot_flops`, plus
    `vector_flops`, the same product written as a multiply and a sum; loop trip counts
    included): the work is split, not also done whole on every device beside a split copy
    that the result folds in times zero."""

    code: ClassVar[str] = "W001"
    title: ClassVar[str] = "matmul-work-share"
    checks: ClassVar[str] = "each device does no more than its share of the matmul work"
    rationale: ClassVar[str] = (
        "Sharding divides the work: a device that does more than its share of the matmuls (a whole "
        "product beside a split decoy) gains nothing from the devices it was given.")

    flops: Size
    why: str = ""

    def describe(self) -> str:
        return "matmul work split over the devices"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if analysis.dot_flops is None:
            return []
        done = sum(f for _, f in analysis.dot_flops) + (analysis.vector_flops or 0.0)
        limit = _size(self.flops, case)
        if done <= limit:
            return []
        return [f"the program's matmuls (dots, and multiplies and sums) do {done:,.0f} FLOPs per device; "
                f"allowed: at most {limit:,} "
                f"(each device multiplies only its share){'. ' + self.why if self.why else ''}"]


@dataclasses.dataclass(frozen=True)
class LargestMatmul(Rule):
    """No one dot, convolution or sum of a product does more than `flops` per device in one run
    (`ProgramAnalysis.largest_matmul`): a collective matmul multiplies each block as it arrives
    (or makes each partial block just before it is sent), so that every ring step has a matmul
    to overlap. One product of the gathered operand, or the whole product made before the
    ring, does nY blocks' work at once, after (or before) all the communication."""

    code: ClassVar[str] = "W002"
    title: ClassVar[str] = "block-sized-matmuls"
    checks: ClassVar[str] = "no single matmul does more than one block's work"
    rationale: ClassVar[str] = (
        "A collective matmul overlaps each block's product with the next block's transfer; one matmul of "
        "the whole operand after (or before) all the communication overlaps nothing.")

    flops: Size
    what: str
    why: str = ""

    def describe(self) -> str:
        return f"each matmul at most {self.what}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if analysis.largest_matmul is None:
            return []
        limit = _size(self.flops, case)
        if analysis.largest_matmul <= limit:
            return []
        times = analysis.largest_matmul / limit if limit else float("inf")
        return [f"one matmul in the program does {analysis.largest_matmul:,.0f} FLOPs per device at once, "
                f"{times:.3g} times one ring step's; allowed: at most {limit:,} ({self.what}). Multiply each block "
                f"inside the ring, one per step, so that its communication overlaps the compute."
                f"{' ' + self.why if self.why else ''}"]


def _uncounted_matmuls(analysis: ProgramAnalysis) -> bool:
    """Does the program multiply in a loop whose trip count is unknown (a stage run an unknown
    number of times, `assignments.steps`), so that no rule can count that work?"""
    return any(stage.runs is None and any(e.collective < 0 for e in stage.events) for stage in analysis.stages)


_UNCOUNTED = ("the program multiplies inside a loop whose trip count is not known at compile time (a "
              "jax.lax.while_loop whose condition reads data), so how much of its matmul work overlaps the "
              "communication cannot be counted; allowed: matmuls in loops with static bounds only. Use "
              "jax.lax.fori_loop with Python ints")


@dataclasses.dataclass(frozen=True)
class PiecesMultipliedApart(Rule):
    """Each piece of a split reduction over `axis` is multiplied on its own, so that its
    reduction can overlap the matmuls of the pieces still to come: no one matmul does more
    than `flops` (`ProgramAnalysis.largest_matmul`: the whole product made at once, then
    sliced), and no operand of an all-reduce or reduce-scatter over `axis` is computed from
    more than `flops` of matmul work (`Collective.matmul_needs`: pieces sliced from a whole
    product made by several matmuls, over parts of the contracting dimension say). A reduction
    run as a ring of collective-permutes has its pieces in the ring's steps: with `ring`, such a
    program is also judged by it (each step's product made in the step, not the whole product
    before the ring). Judged on meshes where `axis` has two devices or more."""

    code: ClassVar[str] = "W003"
    title: ClassVar[str] = "pieces-multiplied-apart"
    checks: ClassVar[str] = "each piece of a split reduction is multiplied on its own"
    rationale: ClassVar[str] = (
        "A reduction split into pieces overlaps only if each piece is multiplied on its own: pieces "
        "sliced from one product already made have no matmul left to hide their communication.")

    axis: str
    flops: Size
    what: str
    ring: "MatmulsInTheRing | None" = None

    def describe(self) -> str:
        return f"each piece of the reduction over {self.axis} multiplied on its own"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if case.all_sizes[f"n{self.axis}"] < 2:
            return []
        if _uncounted_matmuls(analysis):
            return [_UNCOUNTED]
        ringed = []
        if self.ring is not None and any(c.kind == "collective-permute" and self.axis in c.axes
                                         for c in analysis.collectives):
            ringed = [f"the reduction over {self.axis} runs as a ring of collective-permutes, but {v[0].lower()}{v[1:]}"
                      for v in self.ring.violations(analysis, case, inputs)]
        return ringed + self._pieces(analysis, case)

    def _pieces(self, analysis, case) -> list[str]:
        limit = _size(self.flops, case)
        advice = ("Multiply each piece just before its psum (a @ w[:, piece]), not the whole product sliced "
                  "afterwards.")
        if analysis.largest_matmul is not None and analysis.largest_matmul > limit:
            return [f"one matmul in the program does {analysis.largest_matmul:,.0f} FLOPs per device at once; "
                    f"allowed: at most {limit:,} ({self.what}). The whole product is made before any piece of "
                    f"it is reduced, so no reduction can overlap a matmul. {advice}"]
        needs = max((f for c in analysis.collectives if self.axis in c.axes
                     and c.kind in ("all-reduce", "reduce-scatter") for f in c.matmul_needs), default=0.0)
        if needs <= limit:
            return []
        return [f"a piece of the reduction over {self.axis} is computed from {needs:,.0f} FLOPs of matmuls per "
                f"device; allowed: at most {limit:,} ({self.what}). The pieces are slices of one product made "
                f"whole first (by more than one matmul, or in a loop), so no piece's reduction can start before all "
                f"of it is multiplied. {advice}"]


@dataclasses.dataclass(frozen=True)
class MatmulsInTheRing(Rule):
    """At most `blocks` block products (`flops` each) of matmul work per device run outside the
    ring: in the program's stages (`ProgramAnalysis.stages`) that run no collective over
    `axis`, or, in straight-line code (a ring unrolled in Python), where every collective over
    `axis` of the stage needs the matmul or is needed by it, so that none can run beside it. A
    collective matmul multiplies each block inside the ring, beside the step that moves the next
    one, so only the first (or last) block's product has no communication beside it; a ring
    that only moves data, with the products made in a loop of their own before or after it,
    overlaps nothing. Matmuls are the step model's (`assignments.hlo.matmul_work`): dots and
    convolutions, and the same products written as a multiply and a sum (a lone multiply, which
    XLA:CPU fuses across steps, is left to `LargestMatmul`). Matmuls in a loop whose trip count
    is unknown cannot be counted: refused. Judged where the ring has two devices or more."""

    code: ClassVar[str] = "W004"
    title: ClassVar[str] = "matmuls-in-the-ring"
    checks: ClassVar[str] = "the block products run inside the ring, beside the permutes that move the next blocks"
    rationale: ClassVar[str] = (
        "Each step of a collective matmul multiplies the block it holds while the permute moves the next: "
        "block products done before or after a ring that only moves data leave its communication exposed.")

    axis: str
    flops: Size
    blocks: int = 1
    what: str = "the first or last block's product"

    def describe(self) -> str:
        return f"matmuls inside the ring, but for {self.what}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if case.all_sizes.get(f"n{self.axis}", 1) < 2 or not analysis.stages:
            return []
        if _uncounted_matmuls(analysis):
            return [_UNCOUNTED]
        block = _size(self.flops, case)
        outside = 0.0
        for stage in analysis.stages:
            ring = [j for j, e in enumerate(stage.events) if 0 <= e.collective < len(analysis.collectives)
                    and self.axis in analysis.collectives[e.collective].axes]
            if stage.loop and ring:  # a loop that communicates: its matmuls have its steps beside them,
                per_run = sum(e.flops for e in stage.events if e.collective < 0)
                if per_run > len(ring) * block * (1 + 1e-9):  # ... one block's for each step at most
                    return [f"one run of the ring's loop does {per_run:,.0f} FLOPs of matmuls per device beside "
                            f"its {len(ring)} collective(s) over {self.axis} ({per_run / block:.3g} block products); "
                            f"allowed: at most one block product per step ({len(ring) * block:,}). Make each block's "
                            f"product in the step that moves it, not several blocks' in one run of the loop (a "
                            f"lax.cond that makes them all at once leaves the other steps nothing to overlap)."]
                outside += _alone_in_the_loop(stage, ring) * (1 if stage.runs is None else stage.runs)
                continue
            needs = event_needs(stage) if ring else []
            for i, e in enumerate(stage.events):
                if e.collective < 0 and not any(j not in needs[i] and i not in needs[j] for j in ring):
                    outside += e.flops * (1 if stage.runs is None else stage.runs)
        if outside <= self.blocks * block * (1 + 1e-9):
            return []
        return [f"the program does {outside:,.0f} FLOPs of matmuls per device outside the ring, where no "
                f"communication runs beside them ({outside / block:.3g} block products); allowed: at most "
                f"{self.blocks * block:,} ({self.what}). Multiply each block inside the ring's loop, beside the "
                f"permute that brings (or sends) the next, so that each step's communication overlaps a matmul."]


def _alone_in_the_loop(stage, ring: list[int]) -> float:
    """FLOPs of the matmuls of one run of a ring's loop that no collective of the ring can run
    beside: every one of this run's collectives needs the matmul or is needed by it, every one
    of the next run's needs it through what the loop carries, and it needs every one of the
    last run's through what the loop carries (a send made to wait for the product, or a
    product made to wait for the block that arrived, by a data dependency that changes no
    value). A product that the step's own send carries on (the book's "permute the result as
    you accumulate it": acc = ppermute(acc + partial)) runs beside the last run's send, as its
    unrolled form does. 0 when the stage does not say what its loop carries."""
    if not stage.carried:
        return 0.0
    needs = event_needs(stage)

    def carried_from(e, source) -> bool:   # does event `e` read a value the last run made from `source`?
        return any(k < len(stage.carried) and source in stage.carried[k] for k in e.reads)

    alone = 0.0
    for m, e in enumerate(stage.events):
        if e.collective >= 0:
            continue
        now = any(r not in needs[m] and m not in needs[r] for r in ring)
        later = any(not carried_from(stage.events[r], m) for r in ring)
        earlier = any(not carried_from(e, r) for r in ring)
        if not (now or later or earlier):
            alone += e.flops
    return alone


@dataclasses.dataclass(frozen=True)
class AllOf(Rule):
    """Every one of `rules` must hold."""

    rules: tuple

    def describe(self) -> str:
        """Generated from its rules, never written beside them."""
        return "; ".join(r.describe() for r in self.rules)

    def violations(self, analysis, case, inputs=()) -> list[str]:
        return [v for r in self.rules for v in r.violations(analysis, case, inputs)]

    def check(self, program, case) -> list[Problem]:
        return [p for r in self.rules for p in r.check(program, case)]

    def leaves(self) -> tuple[Rule, ...]:
        return tuple(leaf for r in self.rules for leaf in r.leaves())


# --- the backward pass and a sharded training step (first used by `training`): C014, C015, C016, W005 ---


@dataclasses.dataclass(frozen=True)
class BlocksMoved(Rule):
    """Over `axis`, only collective-permutes and all-gathers of one `block` (elements per device
    each) run, and together they move `blocks` blocks per device (loop trip counts included): a
    permute moves one, an all-gather over n devices n-1. So that a design may move one operand's
    blocks round a ring or gather them, as long as nothing else (another operand, a bigger block,
    a second trip) travels."""

    code: ClassVar[str] = "C014"
    title: ClassVar[str] = "blocks-moved"
    checks: ClassVar[str] = "over the ring's axis, only one-block permutes and all-gathers run, moving the blocks the design needs"
    rationale: ClassVar[str] = (
        "A backward pass of a collective matmul moves as many blocks as its forward pass: one ring of "
        "partial sums, and the other operand's blocks by a ring or an all-gather. More blocks, or bigger "
        "ones (the gradient gathered whole), cost link time the design does not spend.")

    axis: str
    block: Size
    blocks: Size
    what: str = ""

    def describe(self) -> str:
        return f"over {self.axis}: one-block permutes and all-gathers only, {self.what or 'the stated number of blocks'}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        n = case.all_sizes.get(f"n{self.axis}", 1)
        block, want = _size(self.block, case), _size(self.blocks, case)
        over = [c for c in analysis.collectives if self.axis in c.axes]
        other = [c for c in over if c.kind not in ("collective-permute", "all-gather")]
        problems = []
        if other:
            problems.append(f"over {self.axis}: {_observed(other)}; allowed: collective-permutes and all-gathers "
                            f"of one block only")
        moving = [c for c in over if c not in other]
        wrong = [c for c in moving if c.size != block or c.axes != (self.axis,)]
        if wrong:
            problems.append(f"over {self.axis}, collectives of the wrong size: {_observed(wrong)}; allowed: one block "
                            f"of {block:,} elements per device each, over {self.axis} alone{_packed(wrong)}")
        if any(c.count is None for c in moving):
            problems.append(_in_an_uncounted_loop(f"a collective over {self.axis}", "the blocks it moves", moving))
            return problems
        moved = sum(c.count * (1 if c.kind == "collective-permute" else n - 1) for c in moving)
        if moved != want:
            problems.append(f"over {self.axis}, {moved} block(s) move per device (a permute moves one, an all-gather "
                            f"over {n} devices {n - 1}); allowed: exactly {want} ({self.what}). Observed: "
                            f"{_observed(moving) if moving else 'nothing'}")
        return problems


@dataclasses.dataclass(frozen=True)
class QuietAxis(Rule):
    """No collective of any kind runs over `axis` (nor over `axis` and another axis at once)."""

    code: ClassVar[str] = "C015"
    title: ClassVar[str] = "quiet-axis"
    checks: ClassVar[str] = "nothing at all is sent over the axis named"
    rationale: ClassVar[str] = (
        "Where every device along an axis holds the same data and does the same work (a step sharded "
        "over X alone), anything sent over that axis is wasted link time: usually a sharding left to "
        "jax.jit that split a value over the axis for nothing, or a sum over the wrong axis.")

    axis: str
    why: str = ""

    def describe(self) -> str:
        return f"nothing over {self.axis}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        bad = [c for c in analysis.collectives if self.axis in c.axes]
        if not bad:
            return []
        return [f"communication over {self.axis}: {_observed(bad)}; allowed: none over {self.axis}"
                + (f". {self.why}" if self.why else "")]


@dataclasses.dataclass(frozen=True)
class GathersStoredArguments(Rule):
    """Every all-gather over `axis` sends one of the arguments named (`args`: their positions in
    the call) as it is stored: its operand computed from those arguments alone
    (`Collective.sources`) and from no matmul (`Collective.matmul_needs`). FSDP gathers weights;
    a gathered gradient, activation or batch is another design's communication (a gradient
    reduce-scattered and then gathered is data parallelism's all-reduce in two halves)."""

    code: ClassVar[str] = "C016"
    title: ClassVar[str] = "gathers-stored-arguments"
    checks: ClassVar[str] = "every all-gather over the axis sends a stored argument (a weight shard), not a computed value"
    rationale: ClassVar[str] = (
        "FSDP stores each weight split over the devices and gathers it only to use it: what crosses the "
        "axis by all-gather is the weights, as stored. Gathering a computed gradient back to every device "
        "undoes the reduce-scatter, and gathering the batch moves data the step never needs moved.")

    axis: str
    args: tuple[int, ...]
    names: tuple[str, ...] = ()
    why: str = ""

    def describe(self) -> str:
        return f"all-gathers over {self.axis} of {', '.join(self.names) or 'the stored arguments'} only"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        bad = [c for c in analysis.collectives if c.kind == "all-gather" and self.axis in c.axes
               and (any(f > 0 for f in c.matmul_needs)
                    or (c.sources is not None and not set(c.sources) <= set(self.args)))]
        if not bad:
            return []
        return [f"all-gather over {self.axis} of a value that is not a stored {' or '.join(self.names) or 'argument'}: "
                f"{_observed(bad)} (computed from matmuls, or from other inputs); allowed: all-gathers of "
                f"{' and '.join(self.names) or 'the stored arguments'} as they arrive" + (f". {self.why}" if self.why else "")]


@dataclasses.dataclass(frozen=True)
class RingOrGatheredProducts(Rule):
    """The products of a backward pass's rings run inside them (`MatmulsInTheRing`'s measure, with
    the ring's steps its collective-permutes over `axis`): each run of a loop of permutes does at
    most `per_step` block products (`flops` each) per permute (a backward step makes dA's term
    and dW's block beside the one permute that carries dA), and at most `blocks` block products run
    where no permute over `axis` can run beside them. Where one operand is gathered whole instead
    (an all-gather over `axis` in the program), its product, `gathered` FLOPs, may run outside the
    ring too, and `gathered_blocks` replaces `blocks` (the gathered operand has no ring of its own
    to leave a first or last block outside). Matmuls in a loop of unknown trip count: refused."""

    code: ClassVar[str] = "W005"
    title: ClassVar[str] = "ring-or-gathered-products"
    checks: ClassVar[str] = ("the rings' block products run inside them; only the product of an operand "
                             "gathered whole may run outside")
    rationale: ClassVar[str] = (
        "A backward pass has two products: dA's reduce-scatter ring must make each block's term in the "
        "step that sends it, or its communication is exposed; dW may gather its operand first (an "
        "all-gather is a ring XLA runs for you), and its one product then runs after the gather.")

    axis: str
    flops: Size
    blocks: int
    gathered: Size
    gathered_blocks: int
    per_step: int = 2
    what: str = ""

    def describe(self) -> str:
        return (f"matmuls inside the ring, but for {self.what} (and the product of an operand gathered "
                f"over {self.axis})")

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if case.all_sizes.get(f"n{self.axis}", 1) < 2 or not analysis.stages:
            return []
        if _uncounted_matmuls(analysis):
            return [_UNCOUNTED]
        block = _size(self.flops, case)
        gathered = any(c.kind == "all-gather" and self.axis in c.axes for c in analysis.collectives)
        allowed = (self.gathered_blocks * block + _size(self.gathered, case)) if gathered else self.blocks * block
        outside = 0.0
        for stage in analysis.stages:
            ring = [j for j, e in enumerate(stage.events) if 0 <= e.collective < len(analysis.collectives)
                    and analysis.collectives[e.collective].kind == "collective-permute"
                    and self.axis in analysis.collectives[e.collective].axes]
            times = 1 if stage.runs is None else stage.runs
            if stage.loop and ring:
                per_run = sum(e.flops for e in stage.events if e.collective < 0)
                if per_run > self.per_step * len(ring) * block * (1 + 1e-9):
                    return [f"one run of the ring's loop does {per_run:,.0f} FLOPs of matmuls per device beside "
                            f"its {len(ring)} permute(s) over {self.axis} ({per_run / block:.3g} block products); "
                            f"allowed: at most {self.per_step} block products per permute "
                            f"({self.per_step * len(ring) * block:,}). Make each block's product in the step that "
                            f"moves it, not several blocks' in one run of the loop."]
                outside += _alone_in_the_loop(stage, ring) * times
                continue
            needs = event_needs(stage) if ring else []
            for i, e in enumerate(stage.events):
                if e.collective < 0 and not any(j not in needs[i] and i not in needs[j] for j in ring):
                    outside += e.flops * times
        if outside <= allowed * (1 + 1e-9):
            return []
        what = (f"A gathered over {self.axis}: its product, and {self.gathered_blocks} block products: dA's first "
                f"(or last) term, and one step a partly unrolled loop may leave outside" if gathered else self.what)
        return [f"the program does {outside:,.0f} FLOPs of matmuls per device where no permute over {self.axis} "
                f"runs beside them ({outside / block:.3g} block products); allowed: at most {int(allowed):,} "
                f"({what}). Make each of dA's terms inside its ring, in the step that sends the partial "
                f"sum on: a ring that only passes on slices of a product made before it overlaps nothing."]


def main(argv: list[str] | None = None) -> int:
    """`python -m assignments.rules [ASSIGNMENT [PART] | RULE-ID | --all]`: every graded
    function's rules with their ids, or one rule explained (`assignments.rulebook`)."""
    from assignments import rulebook  # the package's own modules, also when this one runs as __main__

    return rulebook.main(argv)


if __name__ == "__main__":
    import sys

    sys.exit(main())
