"""Hidden cases for problem1: six meshes, sizes that differ per mesh, shifts of every kind."""
from __future__ import annotations

from assignments.contract import Case, Part

# (mesh, S, D): S divisible by nX and D by nY; local row counts differ between meshes.
MESHES = [
    ((2, 4), 16, 8),
    ((4, 2), 24, 6),
    ((1, 8), 5, 16),
    ((2, 2), 6, 10),
    ((1, 3), 7, 9),
    ((3, 1), 12, 5),
]


def _shifts(rows_per_shard: int) -> list[int]:
    """Positive, negative, zero, and larger than a shard in both directions."""
    return [1, -2, 0, rows_per_shard + 3, -(2 * rows_per_shard + 1)]


def cases(part: Part) -> list[Case]:
    if "shift" not in part.statics:  # the averages: one case per mesh
        return [Case(mesh, {"S": S, "D": D}) for mesh, S, D in MESHES]
    out = []
    for i, (mesh, S, D) in enumerate(MESHES):
        shifts = _shifts(S // mesh[0])
        picks = shifts if i == 0 else [shifts[i % len(shifts)]]
        out += [Case(mesh, {"S": S, "D": D}, {"shift": s}) for s in picks]
    return out
