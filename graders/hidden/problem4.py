"""Hidden cases for problem4: rings of 1 to 8 devices, odd ones (3 and 5) included.
Blocks split in two halves, so D/nY and F/nY are even."""
from __future__ import annotations

from assignments.contract import Case, Part

CASES = [
    ((2, 4), 8, 16, 32),
    ((4, 2), 12, 8, 12),
    ((1, 8), 3, 32, 16),
    ((1, 3), 5, 12, 18),
    ((1, 5), 4, 10, 20),
    ((8, 1), 16, 4, 6),
]


def cases(part: Part) -> list[Case]:
    return [Case(mesh, {"B": B, "D": D, "F": F}) for mesh, B, D, F in CASES]
