"""Not by hand: the all-gather's ring written without ppermute, as jnp.roll of the whole sharded
array by one block, nY-1 times, in jax.jit; XLA turns each roll into a collective-permute of one
block to the neighbour; a shard_map then lays out each device's blocks. The compiled program is
the ring's (nY-1 neighbour permutes of one block), but XLA built it, not the student: the rule
half is lost (S005: the ppermutes must be written in the shard_map)."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def ring_all_gather(A, *, mesh):
    n = mesh.shape['Y']
    cols = A.shape[1] // n
    rolled = [A]
    for _ in range(1, n):                 # device y now holds block y - s of the s-th roll
        rolled.append(jnp.roll(rolled[-1], cols, axis=1))

    def local(r):                         # r: [n, B/nX, cols], blocks idx, idx - 1, ...
        idx = jax.lax.axis_index('Y')
        row = jnp.concatenate(list(r[::-1]), axis=1)     # blocks idx - n + 1, ..., idx
        return jnp.roll(row, (idx + 1) * cols, axis=1)

    return jax.shard_map(local, mesh=mesh, in_specs=P(None, 'X', 'Y'), out_specs=P('X', None),
                         check_vma=False)(jnp.stack(rolled))
