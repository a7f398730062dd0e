"""Hidden cases for problem2: five meshes (8, 4 and 3 devices), sizes that differ per mesh,
and routings chosen to break shortcuts.

The routing of a case is named by its size key ``experts_used`` (read only by the
contract's `routing`, which draws B for visible and hidden cases alike; no shape depends on
it), shown to students in the case's label:
- ``experts_used = E``: uniform: each row of devices spreads its tokens evenly over all
  experts, in a random order (for top-k with k = E, every token goes to every expert once).
  Even counts make the bytes an all-to-all needs the same for every seed, so sending every
  token to every row (nX times that) is told apart from honest rounding;
- ``experts_used = 1``: every token to one expert, so one device receives all S tokens
  (a fixed per-expert capacity drops most of them);
- ``1 < experts_used < E``: skewed: the used experts get tokens with probabilities falling
  as 1, 1/2, 1/3, ..., and the other experts receive nothing. For top-k (on 2x2, k = 3 over
  three experts) a token's choices are drawn independently, so most tokens repeat some of
  their experts but not all ([e, e, f]): the mean counts e twice.

The 3x1 mesh has E/nX = 3 experts per row, so locating an expert with a shift and a mask
(right only when E/nX is a power of two) gets its row or its index wrong there.

Every size keeps the rules within reach of the designs the task asks for (`assignments.
contracts.problem2.size_problems`: gathered tokens and partial outputs below a device's share
of [S, D, F], a device's experts below [S, D]), and most sit where a plausible but fragile
design crosses a rule, each derived from the rule's formula (T = S/nX tokens per device,
G = E/nX experts per device, R = F/nY result columns per device, or F for the _x parts):
- a padded buffer of every token crosses the share S*D*R/nX (S*D*F on one device) through
  its [G, S, R] product when E >= D: moe_local (20, 6, 18, 8); moe_allgather on 1x8 and on
  4x2; moe_allgather_x on 4x2, 1x8 and 2x2. Each keeps E < R, where its [G, S, D] buffer,
  and the [S, G*D] copy XLA:CPU makes for jax.lax.ragged_dot (accepted in every part), stay
  below the share: a compiler's copy never costs a single-call grouping its points;
- moe_all_to_all(_x), S*D on nX >= 2: a round's padded buffer or ragged_dot copy, G x
  nX*chunk rows, reaches S when G >= 4 with the old hint's chunk T//4 (2x2 with E = 8, and
  the visible 2x4 with E = 8), or when G >= 2*nX with chunk T//(2*nX);
- the 2x byte bound: with chunk c, a busiest pair of rows sending m = c + 1 pairs costs two
  whole rounds, 2c slots, and the ids ride along: over 2m(D + R) as soon as c > D + R. On
  4x2, T = 73 = 4*18 + 1 tokens spread evenly over 8 experts give m = 19 = T//4 + 1 with
  18 > D + R = 17 (for the _x parts T = 65, m = 17 = 16 + 1, 16 > D + F = 15): "odd blocks", T not a
  multiple of the chunk. The notebook's chunk, at most T//(2*nX), holds on every routing;
- top-k: k copies of the local tokens reach S*D when k >= nX (k = E and k = 3 cases).
"""
from __future__ import annotations


from assignments.contract import Case, Part

# (mesh, S, D, F, E): S and E divisible by nX, D and F by nY.
MESHES = [
    ((2, 4), 64, 16, 48, 4),
    ((4, 2), 292, 8, 18, 8),   # chunk boundary of the byte bound (T = 73); E >= D
    ((1, 8), 24, 8, 72, 8),    # the all-gather path on 1x8: D <= E < F/nY
    ((2, 2), 48, 10, 20, 8),   # E/nX = 4: a padded round of chunk T//4 holds S*D (E < D, R)
    ((3, 1), 45, 10, 12, 9),   # odd T = 15; E/nX = 3, no power of two; E < D
]

# The latest book's shardings (moe_allgather_x, moe_all_to_all_x): W[E_X, D, F], A[S_X, D].
MESHES_X = [
    ((2, 4), 64, 16, 24, 4),
    ((4, 2), 260, 6, 9, 8),    # chunk boundary of the byte bound (T = 65); D <= E < F
    ((1, 8), 24, 6, 10, 8),    # D <= E < F: the padded product crosses, ragged_dot does not
    ((2, 2), 96, 8, 10, 8),    # E/nX = 4: a round's ragged_dot copy with chunk T//4 holds S*D; E >= D
    ((3, 1), 45, 10, 12, 9),   # odd T = 15; E/nX = 3, no power of two; E < D
]
X_PARTS = ("moe_allgather_x", "moe_all_to_all_x")

# Single device (moe_local): (S, D, F, E), E < F (and E < S).
LOCAL = [(32, 16, 24, 4), (20, 6, 18, 8), (27, 10, 14, 7)]

ROUTED_PARTS = ("moe_all_to_all", "moe_all_to_all_x")


def _routings(E: int, idle: bool = True) -> list[int]:
    """experts_used: uniform, one expert, and (when `idle`) a few experts with the rest idle."""
    return [E, 1, max(2, E // 2)] if idle else [E, 1]


def _topk(E: int, index: int) -> list[tuple[int, int]]:
    """(k, experts_used) pairs for one mesh: k = E (every expert, once each), k = 3 all to one
    expert (the same expert chosen three times), except on 2x2, where k = 3 picks from three
    skewed experts, so that rows repeat some experts but not all ([e, e, f]: the mean counts e
    twice); on the first two meshes also k = 2 uniform and k = 1 with idle experts."""
    extra = {0: [(2, E)], 1: [(1, max(2, E // 2))]}
    return [(E, E), (3, 3 if index == 3 else 1)] + extra.get(index, [])


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
