"""Hidden cases for collectives: rings of 1, 2, 3, 4 and 8 devices (problem3's meshes), with
sizes that differ per mesh, so that sizes written into the code fail.

Every case has D a multiple of nY (the blocks are [B/nX, D/nY]) and B a multiple of both nX and
nY (the reduce-scatter splits B over X, the all-to-all over Y). Boundaries a plausible design
crosses, from the rules' formulas:
- a block with an odd number of columns (4x2: [3, 5]; 1x3 and 1x8: 3 columns; 2x4 second case:
  [2, 3]): the bidirectional ring's halves are one column apart there, and a design that assumes
  even blocks loses a column or pads one (the one-way bytes bound);
- a ring of 2 (4x2), whose one neighbour is both directions, and a ring of 1 (8x1), where every
  collective is a no-op and only the lowered program shows a psum the code still calls;
- a ring of 3 (1x3), odd, where a ring that assumes n even pairs devices wrongly.
"""
from __future__ import annotations

from assignments.contract import Case, Part

CASES = [
    ((2, 4), 8, 16),
    ((4, 2), 12, 10),
    ((1, 8), 16, 24),
    ((2, 2), 6, 6),
    ((1, 3), 6, 9),
    ((8, 1), 16, 5),
    ((2, 4), 4, 12),
]


def cases(part: Part) -> list[Case]:
    return [Case(mesh, {"B": B, "D": D}) for mesh, B, D in CASES]
