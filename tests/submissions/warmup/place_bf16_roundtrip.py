"""place that round-trips the values through bfloat16: right shape, dtype (float32) and
sharding, values off by up to 2^-9 relative. Exact on small integers (arange inputs), so only
random float inputs and per-element tolerances that reject bfloat16 catch it.

Broken part: place (values only; the file defines only the function it is graded on).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def place(x, *, mesh):
    x = x.astype(jnp.bfloat16).astype(jnp.float32)   # Broken: a bfloat16 round trip
    return jax.device_put(x, NamedSharding(mesh, P('X', 'Y')))
