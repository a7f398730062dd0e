"""explicit_matmul that resolves the ambiguity with the wrong output sharding, P('X', None):
right values, wrong sharding. On an Explicit mesh the fix is out_sharding= on the operation,
not out_shardings on jax.jit: the message must say so.

Broken part: explicit_matmul (values half: sharding).
"""

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def explicit_matmul(x, w, *, mesh):
    return jnp.matmul(x, w, out_sharding=NamedSharding(mesh, P('X', None)))   # Broken: not P('X','Y')
