"""Hidden cases for problem3: five meshes (8, 4 and 3 devices; rings of 1 to 8), sizes that
differ per mesh. D and F are multiples of nY; F is even so that the reduction can be split."""
from __future__ import annotations

from assignments.contract import Case, Part

CASES = [
    ((2, 4), 8, 16, 32),
    ((4, 2), 12, 10, 12),
    ((1, 8), 3, 24, 16),
    ((2, 2), 6, 6, 10),
    ((1, 3), 5, 9, 12),
    ((8, 1), 16, 5, 6),
]


def cases(part: Part) -> list[Case]:
    return [Case(mesh, {"B": B, "D": D, "F": F}) for mesh, B, D, F in CASES]
