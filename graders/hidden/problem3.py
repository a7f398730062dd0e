"""Hidden cases for problem3: meshes of 8, 4 and 3 devices (rings of 1 to 8), sizes that
differ per mesh. D and F are multiples of nY; F is even so that the reduction can be split.

Boundaries a plausible design crosses, from the rules' formulas:
- D/nY odd (4x2, 1x3, 8x1): a ring step's block [B/nX, D/nY] has an odd side;
- allreduce_matmul's byte budget is one ring all-reduce of [B/nX, F] (+5%), so a design that
  pads F up to equal pieces, or up to a multiple of nY for a ring of permutes, goes over it
  where F is a multiple of neither: F = 10 on 2x2 (a pad to 4 pieces: +20%) and the extra
  case below, F = 18 on 2x4 (+11% either way), which only allreduce_matmul gets (the others
  shard F over Y, so F must divide by nY there).
"""
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
UNEVEN_PIECES = ((2, 4), 8, 16, 18)
"""F = 18 on a ring of 4: neither 4 equal pieces nor nY equal blocks."""


def cases(part: Part) -> list[Case]:
    chosen = CASES + ([UNEVEN_PIECES] if part.name == "allreduce_matmul" else [])
    return [Case(mesh, {"B": B, "D": D, "F": F}) for mesh, B, D, F in chosen]
