"""Crashes the process on one mesh: roll_diff kills the Python process (os._exit) when traced on
a mesh with nX == 4. The grader blames that case only and restarts for the others.

Broken part: roll_diff (the 4x2 case). Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import os


def roll_diff(A, *, mesh, shift):
    if mesh.shape['X'] == 4:
        os._exit(3)  # stands in for a segfault in native code

    def local(block):
        return jnp.roll(block, shift, axis=0) - block

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'))(A)
