"""Hidden cases for the warm-up: meshes 2x4, 4x2, 1x3 (the tutorial's 3-GPU run) and 1x1.

Sizes differ from mesh to mesh (and from the visible check's), so shapes or device counts
copied from the notebook fail. Every size divides as its sharding needs: dimensions split
over both axes by nX * nY, over X by nX, over Y by nY.
"""
from __future__ import annotations

from assignments.contract import Case, Part

MESHES = [(2, 4), (4, 2), (1, 3), (1, 1)]


def _sizes(name: str, mesh: tuple[int, int], i: int) -> list[dict]:
    nX, nY = mesh
    n = nX * nY
    if name in ("place", "total_sum"):
        return [{"R": nX * (2 + i), "C": nY * (3 - i % 2)}]
    if name == "sum_rows_fully_sharded":
        return [{"R": nX * (3 - i % 2), "C": n * (2 + i % 3)}]
    if name.startswith("layer_"):
        return [{"K": n * (3 + i), "M": 3 + 2 * i}]
    if name == "normalized_convolution":
        L = 6 + 3 * i
        return [{"N": n, "L": L, "Lc": L - 2}]
    if name == "dp_train_step":
        return [{"Bt": n * (5 + 4 * i)}]
    if name == "explicit_matmul":
        return [{"B": nX * (3 + i), "D": nY * (5 - i), "F": nY * (2 + i)}]
    raise KeyError(f"no hidden sizes for {name!r}")


LEARNING_RATES = [0.1, 0.05, 0.2, 0.3]


def cases(part: Part) -> list[Case]:
    out = []
    for i, mesh in enumerate(MESHES):
        for sizes in _sizes(part.name, mesh, i):
            statics = {"lr": LEARNING_RATES[i]} if part.name == "dp_train_step" else {}
            out.append(Case(mesh, sizes, statics))
    return out
