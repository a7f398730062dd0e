"""Communication rules: what a graded function's compiled program may communicate.

A rule looks at the `ProgramAnalysis` of one compiled case (and, for rules that depend on
the data, such as a routing, the case's input arrays) and lists what breaks it, each message
naming what was observed against what is allowed. Rules compose with
`AllOf`; sizes are numbers or functions of the case's sizes (a dict with the problem's
sizes plus ``nX`` and ``nY``), e.g. ``lambda s: s["B"] // s["nX"] * s["D"] // s["nY"]``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Union

from .hlo import Collective, ProgramAnalysis

Size = Union[int, Callable[[dict], int]]


def _size(size: Size, case) -> int:
    return size(case.all_sizes) if callable(size) else int(size)


def describe_collective(c: Collective) -> str:
    axes = "+".join(c.axes) or "no axis"
    times = "an unknown number of times" if c.count is None else f"x{c.count}"
    return f"{c.kind} over {axes} of {c.shape} ({c.bytes:,} bytes) {times}"


def _observed(collectives) -> str:
    return "; ".join(describe_collective(c) for c in collectives) or "none"


def _over(c: Collective, axes: tuple[str, ...] | None) -> bool:
    return axes is None or any(a in c.axes for a in axes)


@dataclasses.dataclass(frozen=True)
class NoCommunication:
    """The compiled program must contain no collective at all."""

    why: str = ""

    def describe(self) -> str:
        return "no communication"

    def violations(self, analysis: ProgramAnalysis, case, inputs=()) -> list[str]:
        if not analysis.collectives:
            return []
        hint = f". {self.why}" if self.why else ""
        return [f"communication observed: {_observed(analysis.collectives)}; allowed: none{hint}"]


@dataclasses.dataclass(frozen=True)
class AnyCommunication:
    """No rule on communication (reported, not judged)."""

    def describe(self) -> str:
        return "any (reported, not judged)"

    def violations(self, analysis: ProgramAnalysis, case, inputs=()) -> list[str]:
        return []


@dataclasses.dataclass(frozen=True)
class OnlyKinds:
    """Every collective must be one of `kinds`."""

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
class Forbid:
    """No collective of `kind` (over any of `axes`, when given)."""

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
        bad = [c for c in analysis.of_kind(self.kind) if _over(c, self.axes)
               and (self.dtypes is None or any(o.dtype.startswith(self.dtypes) for o in c.operands))]
        if not bad:
            return []
        hint = f". {self.why}" if self.why else ""
        return [f"communication observed: {_observed(bad)}; allowed: {self.describe()}{hint}"]


@dataclasses.dataclass(frozen=True)
class Exactly:
    """Exactly `count` runs of `kind` (loop trip counts included), each of `elements`
    elements per device when given, over `axes` when given."""

    kind: str
    count: Size
    elements: Size | None = None
    axes: tuple[str, ...] | None = None

    def describe(self) -> str:
        size = "" if self.elements is None else " of the stated size"
        return f"exactly the stated number of {self.kind}s{size}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        want = _size(self.count, case)
        found = [c for c in analysis.of_kind(self.kind) if _over(c, self.axes)]
        problems = []
        if any(c.count is None for c in found):
            problems.append(f"a {self.kind} runs inside a loop whose trip count is not known at compile "
                            f"time; use a loop with static bounds (jax.lax.fori_loop with Python ints)")
        got = sum(c.count or 0 for c in found)
        over = f" over {'/'.join(self.axes)}" if self.axes else ""
        if got != want:
            problems.append(f"{self.kind}{over} runs {got} time(s); allowed: exactly {want} "
                            f"(observed: {_observed(found)})")
        if self.elements is not None:
            size = _size(self.elements, case)
            wrong = [c for c in found if c.elements != size]
            if wrong:
                problems.append(f"{self.kind} of the wrong size: {_observed(wrong)}; allowed: "
                                f"{size:,} elements per device each")
        return problems


@dataclasses.dataclass(frozen=True)
class MaxTotalBytes:
    """Bytes sent per device over a whole run, summed over every collective, at most `limit`.

    With `ring`, each collective counts the bytes a ring algorithm puts on the links
    (`Collective.ring_bytes`: an all-reduce of V bytes costs 2(n-1)/n V), so that a native
    all-reduce and a ring of permutes are measured alike."""

    limit: Size
    what: str = "the minimum"
    ring: bool = False

    def describe(self) -> str:
        return f"at most {self.what} in bytes per device"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        limit = _size(self.limit, case)
        total = analysis.total_ring_bytes if self.ring else analysis.total_bytes
        total = None if total is None else int(round(total))
        if total is None:
            return [f"cannot bound the bytes sent: a collective runs inside a loop with no "
                    f"compile-time trip count (observed: {_observed(analysis.collectives)})"]
        if total > limit:
            return [f"sends {total:,} bytes per device; allowed: at most {limit:,} ({self.what}). "
                    f"Observed: {_observed(analysis.collectives)}"]
        return []


@dataclasses.dataclass(frozen=True)
class NoValueAtLeast:
    """No computed value (outside fusions) with `elements` or more elements per device."""

    elements: Size
    what: str
    why: str = ""
    """What to do instead, appended to the message."""

    def describe(self) -> str:
        return f"no value as large as {self.what}"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        limit = _size(self.elements, case)
        big = analysis.values_at_least(limit)
        if not big:
            return []
        seen = ", ".join(f"{v.name} = {v.shape} ({v.shape.elements:,} elements)" for v in big[:3])
        hint = f". {self.why}" if self.why else ""
        return [f"the program computes {seen}; allowed: no value with {limit:,} or more elements "
                f"({self.what}){hint}"]


@dataclasses.dataclass(frozen=True)
class OnlyWhen:
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


@dataclasses.dataclass(frozen=True)
class SplitReduction:
    """The reduction over `axis` runs in at least `pieces` pieces (separate all-reduces or
    reduce-scatters, operands of one combined all-reduce, or any collective-permute ring), so its
    communication can overlap the matmuls that produce the later pieces."""

    axis: str
    pieces: int = 2

    def describe(self) -> str:
        return f"the reduction over {self.axis} split into at least {self.pieces} pieces"

    def violations(self, analysis, case, inputs=()) -> list[str]:
        if case.all_sizes[f"n{self.axis}"] < 2:
            return []  # nothing to reduce over a one-device axis
        reductions = [c for c in analysis.collectives if self.axis in c.axes]
        if any(c.kind == "collective-permute" for c in reductions):
            return []
        # A reduce-scatter reduces too (scatter-then-gather is an all-reduce in two steps).
        pieces = sum(c.pieces * (c.count or 1) for c in reductions
                     if c.kind in ("all-reduce", "reduce-scatter"))
        if pieces >= self.pieces:
            return []
        return [f"the reduction over {self.axis} runs as {pieces} piece(s) ({_observed(reductions)}); "
                f"allowed: at least {self.pieces}. Tile the output dimension and reduce each tile "
                f"separately (one psum per tile), so a tile's communication can overlap the next "
                f"tile's matmul"]


@dataclasses.dataclass(frozen=True)
class BothDirections:
    """The collective-permutes over `axis` go both ways around the ring (on rings of 3 or
    more devices; on 2 devices the one neighbour is both ways)."""

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
class HalfBlocks:
    """Every collective-permute over `axis` carries half of a [rows, cols] block, split
    along either dimension: exactly half when that dimension is even, within one row or
    column of half when it is odd. What a bidirectional ring sends each way per step."""

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
                 if self.axis in p.axes and not low <= p.elements <= high]
        if not wrong:
            return []
        allowed = f"{low:,}" if low == high else f"{low:,} to {high:,}"
        return [f"collective-permute of the wrong size: {_observed(wrong)}; allowed: {allowed} "
                f"elements each, half of a [{r}, {c}] block (within one row or column when the "
                f"block is odd), so that both directions carry the same load"]


@dataclasses.dataclass(frozen=True)
class AllOf:
    """Every one of `rules` must hold."""

    rules: tuple
    text: str = ""

    def describe(self) -> str:
        return self.text or "; ".join(r.describe() for r in self.rules)

    def violations(self, analysis, case, inputs=()) -> list[str]:
        return [v for r in self.rules for v in r.violations(analysis, case, inputs)]
