"""allgather_matmul_bidirectional that splits each block unevenly: one column of A travels one
way around the ring, the other D/nY - 1 columns the other way. Right values, both directions
used and no more bytes than the one-way ring, but one direction carries almost everything:
the rule asks every permute to carry half the block (within one row or column when odd).

Broken part: allgather_matmul_bidirectional (rule only).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def _rings(n):
    """Pairs for one step left (j -> j-1) and one step right (j -> j+1) around a ring of n."""
    return [(j, (j - 1) % n) for j in range(n)], [(j, (j + 1) % n) for j in range(n)]


def allgather_matmul_bidirectional(A, W, *, mesh):
    def local(a, w):                      # a: [B/nX, D/nY], w: [D, F/nY]
        n = jax.lax.axis_size('Y')
        idx = jax.lax.axis_index('Y')
        chunk = a.shape[1]
        half = 1                          # Broken: one column goes one way, the rest the other
        left, right = _rings(n)

        def w_rows(block, which):         # rows of w for the first column (0) or the rest (1)
            return jax.lax.dynamic_slice_in_dim(w, block * chunk + which * half,
                                                half if which == 0 else chunk - half, axis=0)

        def step(s, carry):
            acc, lo, hi = carry           # lo: first half of chunk idx + s; hi: second half of idx - s
            acc = acc + lo @ w_rows((idx + s) % n, 0) + hi @ w_rows((idx - s) % n, 1)
            return acc, jax.lax.ppermute(lo, 'Y', left), jax.lax.ppermute(hi, 'Y', right)

        acc = jax.lax.pcast(jnp.zeros((a.shape[0], w.shape[1]), a.dtype), ('X', 'Y'), to='varying')
        acc, lo, hi = jax.lax.fori_loop(0, n - 1, step, (acc, a[:, :half], a[:, half:]))
        return acc + lo @ w_rows((idx + n - 1) % n, 0) + hi @ w_rows((idx - n + 1) % n, 1)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', 'Y'), P(None, 'Y')),
                         out_specs=P('X', 'Y'))(A, W)
