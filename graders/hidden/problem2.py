"""Hidden cases for problem2: five meshes (8, 4 and 3 devices), sizes that differ per mesh,
and routings chosen to break shortcuts.

The routing of a case is named by its size key ``experts_used`` (read only by
`make_inputs` here; no shape depends on it), shown to students in the case's label:
- ``experts_used = E``: uniform: each row of devices spreads its tokens evenly over all
  experts, in a random order (for top-k with k = E, every token goes to every expert once).
  Even counts make the bytes an all-to-all needs the same for every seed, so sending every
  token to every row (nX times that) is told apart from honest rounding;
- ``experts_used = 1``: every token to one expert, so one device receives all S tokens
  (a fixed per-expert capacity drops most of them);
- ``1 < experts_used < E``: skewed: the used experts get tokens with probabilities falling
  as 1, 1/2, 1/3, ..., and the other experts receive nothing.

Sizes keep the memory rules apart from honest solutions: F > nX*nY and E*nY < F (so the
gathered activations, even expanded per local expert, stay below a device's share of
[S, D, F]), and E*F < S*nX*nY (so a device's experts stay below the global [S, D]).
"""
from __future__ import annotations

import numpy as np

from assignments.contract import Case, Part
from assignments.contract import make_inputs as default_inputs

# (mesh, S, D, F, E): S and E divisible by nX, D and F by nY.
MESHES = [
    ((2, 4), 64, 16, 48, 4),
    ((4, 2), 56, 12, 40, 8),
    ((1, 8), 24, 8, 64, 6),
    ((2, 2), 48, 10, 24, 6),
    ((3, 1), 45, 8, 12, 6),
]

# The latest book's shardings (moe_allgather_x, moe_all_to_all_x): W[E_X, D, F], A[S_X, D].
# Whole F per device, so E*F < S*nX (a device's experts stay below the global [S, D]),
# E*F < 4*nX*D (so does one round's padded product), E < D and nX < F.
MESHES_X = [
    ((2, 4), 64, 16, 24, 4),
    ((4, 2), 56, 12, 20, 8),
    ((1, 8), 24, 8, 16, 6),
    ((2, 2), 48, 10, 12, 6),
    ((3, 1), 45, 8, 12, 6),
]
X_PARTS = ("moe_allgather_x", "moe_all_to_all_x")

# Single device (moe_local): (S, D, F, E), with E < F.
LOCAL = [(32, 16, 24, 4), (20, 6, 18, 5), (27, 10, 14, 7)]

ROUTED_PARTS = ("moe_all_to_all", "moe_all_to_all_x")


def _routings(E: int, idle: bool = True) -> list[int]:
    """experts_used: uniform, one expert, and (when `idle`) a few experts with the rest idle."""
    return [E, 1, max(2, E // 2)] if idle else [E, 1]


def _topk(E: int, index: int) -> list[tuple[int, int]]:
    """(k, experts_used) pairs for one mesh: k = E (every expert, once each), k = 3 all to one
    expert (the same expert chosen three times); on the first two meshes also k = 2 uniform
    and k = 1 with idle experts."""
    extra = {0: [(2, E)], 1: [(1, max(2, E // 2))]}
    return [(E, E), (3, 1)] + extra.get(index, [])


def cases(part: Part) -> list[Case]:
    if part.name == "moe_local":
        return [Case((1, 1), {"S": S, "D": D, "F": F, "E": E, "experts_used": used})
                for S, D, F, E in LOCAL for used in _routings(E)]
    out = []
    for i, (mesh, S, D, F, E) in enumerate(MESHES_X if part.name in X_PARTS else MESHES):
        sizes = {"S": S, "D": D, "F": F, "E": E}
        if part.name == "moe_topk":
            out += [Case(mesh, {**sizes, "k": k, "experts_used": used}) for k, used in _topk(E, i)]
        elif part.name in ROUTED_PARTS:
            # Idle experts on two meshes (every token to one expert already idles whole rows).
            out += [Case(mesh, {**sizes, "experts_used": used})
                    for used in _routings(E, idle=mesh in ((4, 2), (3, 1)))]
        else:  # moe_jit, moe_allgather: uniform and all-to-one
            out += [Case(mesh, {**sizes, "experts_used": used}) for used in _routings(E, idle=False)]
    return out


def routing(case: Case, seed: int) -> np.ndarray:
    """The expert assignments B of a case: int32[S] or, with k in the sizes, int32[S, k]."""
    s = case.all_sizes
    E, S, k = s["E"], s["S"], s.get("k")
    used = s.get("experts_used", E)
    rng = np.random.default_rng([seed, 2])
    experts = rng.permutation(E)[:used]
    shape = (S,) if k is None else (S, k)
    if k is not None and k == E and used == E:
        chosen = np.stack([rng.permutation(E) for _ in range(S)])  # every expert, once each
    elif used == E:  # even: each row's (token, choice) pairs cycle through the experts, shuffled
        rows = np.arange(S * (k or 1)).reshape(s["nX"], -1) % E
        chosen = experts[rng.permuted(rows, axis=1)].reshape(shape)
    else:  # skewed over the used experts (one expert when used == 1)
        weights = 1.0 / np.arange(1, used + 1)
        chosen = experts[rng.choice(used, size=shape, p=weights / weights.sum())]
    return chosen.astype(np.int32)


def make_inputs(part: Part, case: Case, seed: int) -> list[np.ndarray]:
    W, A, _ = default_inputs(part, case, seed)
    return [W, A, routing(case, seed)]
