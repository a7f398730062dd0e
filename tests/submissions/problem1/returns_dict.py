"""Not an array: shard_average_shard_map returns a dict holding the result (a pytree the
contract does not ask for). The judge must say so, not fail as if the process had crashed.

Broken part: shard_average_shard_map. Every other function is the reference solution.
"""

import jax
from jax.sharding import NamedSharding, PartitionSpec as P


def shard_average_shard_map(A, *, mesh):
    def local(block):
        return block.mean(axis=0, keepdims=True)

    # Broken: the result wrapped in a dict.
    return {"average": jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)}
