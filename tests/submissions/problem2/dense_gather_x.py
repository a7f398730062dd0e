"""The book's latest shardings (W[E_X, D, F], A[S_X, D]) with the dense W[B] gather in
moe_allgather_x: right values, memory rule broken on every case, so half of its points.

The other two functions are right and show the accepted alternatives to the padded buffer:
moe_local groups the tokens with jax.lax.ragged_dot (it runs on XLA:CPU), and
moe_all_to_all_x multiplies each round's tokens with a jax.lax.scan over the local experts.
Both keep full marks.
"""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def moe_local(W, A, B):
    order = jnp.argsort(B)
    sizes = jnp.bincount(B, length=W.shape[0]).astype(jnp.int32)
    y = jax.lax.ragged_dot(A[order], W, sizes)
    return jnp.zeros_like(y).at[order].set(y)


def moe_allgather_x(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'X', axis=0, tiled=True)
        b = jax.lax.all_gather(b, 'X', axis=0, tiled=True) - jax.lax.axis_index('X') * w.shape[0]
        mine = (b >= 0) & (b < w.shape[0])
        # Broken: w[b] is [S, D, F], one expert matrix per token.
        out = jnp.einsum("sd,sdf->sf", a, w[jnp.clip(b, 0, w.shape[0] - 1)])
        return jax.lax.psum_scatter(jnp.where(mine[:, None], out, 0), 'X', scatter_dimension=0, tiled=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)


def scanned(w, x, e):
    """x[i] @ w[e[i]], one expert per scan step; rows with e outside [0, E) give zeros."""
    def one_expert(out, k):
        return out + jnp.where((e == k)[:, None], x @ w[k], 0), None

    start = jax.lax.pcast(jnp.zeros((x.shape[0], w.shape[2]), x.dtype), 'X', to='varying')
    return jax.lax.scan(one_expert, start, jnp.arange(w.shape[0]))[0]


def moe_all_to_all_x(W, A, B, *, mesh):
    def local(w, a, b):
        tokens, nX, mine = a.shape[0], jax.lax.axis_size('X'), w.shape[0]
        chunk = max(1, tokens // (2 * max(nX, mine)))
        dest = b // mine
        order = jnp.argsort(dest)
        counts = jnp.bincount(dest, length=nX)
        starts = jnp.cumsum(counts) - counts
        rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), 'X', to='varying')

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)[None, :]
            valid = pos < counts[:, None]
            token = order[jnp.minimum(starts[:, None] + pos, tokens - 1)]
            x = jax.lax.all_to_all(jnp.where(valid[..., None], a[token], 0), 'X', 0, 0)
            e = jax.lax.all_to_all(jnp.where(valid, b[token] % mine, mine), 'X', 0, 0)
            y = scanned(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
            y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0)
            return r + 1, out.at[token].add(jnp.where(valid[..., None], y, 0))

        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)
