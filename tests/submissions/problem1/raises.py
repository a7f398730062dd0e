"""Raises an exception: block_average_shard_map raises ValueError when called.

Broken part: block_average_shard_map. Every other function is the reference solution.
"""


def block_average_shard_map(A, *, mesh):
    if A.ndim == 2:
        raise ValueError("block sizes do not divide the array")
    return A
