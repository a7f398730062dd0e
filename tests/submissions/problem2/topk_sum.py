"""Top-k that sums instead of averaging: right for k = 1, wrong for every k > 1.

Broken part: moe_topk. Every other function is the reference solution.
"""


def moe_topk(W, A, B, *, mesh):
    # Broken: the k experts' outputs are added, not averaged.
    k = B.shape[1]
    return moe_all_to_all(W, A, B, mesh=mesh) * k
