"""Communication rules: what a graded function's compiled program may communicate.

A rule looks at the `ProgramAnalysis` of one compiled case and lists what breaks it,
each message naming what was observed against what is allowed.
"""
from __future__ import annotations

import dataclasses

from .hlo import Collective, ProgramAnalysis


def describe_collective(c: Collective) -> str:
    axes = "+".join(c.axes) or "no axis"
    times = "an unknown number of times" if c.count is None else f"x{c.count}"
    return f"{c.kind} over {axes} of {c.shape} ({c.bytes:,} bytes) {times}"


@dataclasses.dataclass(frozen=True)
class NoCommunication:
    """The compiled program must contain no collective at all."""

    why: str = ""

    def describe(self) -> str:
        return "no communication"

    def violations(self, analysis: ProgramAnalysis, case) -> list[str]:
        if not analysis.collectives:
            return []
        seen = "; ".join(describe_collective(c) for c in analysis.collectives)
        hint = f" {self.why}" if self.why else ""
        return [f"communication observed: {seen}; allowed: none.{hint}"]


@dataclasses.dataclass(frozen=True)
class AnyCommunication:
    """No rule on communication (reported, not judged)."""

    def describe(self) -> str:
        return "any (reported, not judged)"

    def violations(self, analysis: ProgramAnalysis, case) -> list[str]:
        return []
