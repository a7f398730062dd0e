"""An infinite loop while tracing one function: shard_average_shard_map never returns.

Broken part: shard_average_shard_map. Every other function is the reference solution.
"""


def shard_average_shard_map(A, *, mesh):
    while True:
        pass
