"""Hidden cases for problem4: rings of 1 to 8 devices, odd ones (3 and 5) included.

Boundaries a plausible design crosses, from the rules' formulas: a half block is exactly half
when a block's side is even and within one row or column when it is odd, and the one-way
version's bytes bound the total. So two cases have odd blocks (D/nY = 3, F/nY = 5), on a ring
of 4 and on the odd ring of 3: a design that assumes even blocks loses a column there (wrong
values), and one that pads both halves to the larger sends more than the one-way version.
The other cases have even blocks (on 1x8 with an odd number of rows, B/nX = 3).
"""
from __future__ import annotations

from assignments.contract import Case, Part

CASES = [
    ((2, 4), 8, 16, 32),
    ((4, 2), 12, 8, 12),
    ((1, 8), 3, 32, 16),
    ((1, 3), 5, 9, 15),
    ((1, 5), 4, 10, 20),
    ((8, 1), 16, 4, 6),
    ((2, 4), 6, 12, 20),
]


def cases(part: Part) -> list[Case]:
    return [Case(mesh, {"B": B, "D": D, "F": F}) for mesh, B, D, F in CASES]
