"""jax.lax.ragged_dot as the grouping everywhere. XLA:CPU runs it as one matmul over a masked
copy of its rows per expert group, [rows, groups*D]: in one call over every token (moe_local,
moe_allgather, moe_allgather_x) that copy stays below the rule on every hidden case (E < F/nY),
so these keep full marks. In the rounds the chunk is the student's: with the plain chunk
(S/nX) // (2*nX), a round's copy is E/nX x nX*chunk rows of D, as large as all S tokens once
E/nX >= 2*nX (2x2 with E = 8, and the visible 2x4 with E = 8): the memory half of those cases
is lost, with a message saying the compiler made the value and what chunk to use.

Broken parts: moe_all_to_all, moe_all_to_all_x (memory rule only, where E/nX >= 2*nX).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def moe_local(W, A, B):
    # Tokens grouped by expert, one jax.lax.ragged_dot; ids outside [0, E) give zeros.
    E = W.shape[0]
    expert = jnp.where((B >= 0) & (B < E), B, E)               # E: no expert here (sorted last)
    order = jnp.argsort(expert)
    sizes = jnp.bincount(expert, length=E + 1)[:-1].astype(jnp.int32)
    y = jax.lax.ragged_dot(A[order], W, sizes)                  # rows past sum(sizes) come out zero
    return jnp.zeros_like(y).at[order].set(y)


def moe_allgather_x(W, A, B, *, mesh):
    def local(w, a, b):                                         # w: [E/nX, D, F], a: [S/nX, D]
        a = jax.lax.all_gather(a, 'X', axis=0, tiled=True)      # [S, D]: every token
        b = jax.lax.all_gather(b, 'X', axis=0, tiled=True)      # [S]
        b = b - jax.lax.axis_index('X') * w.shape[0]            # my local expert ids (others: out of range)

        mine = moe_local(w, a, b)                                # [S, F], zero unless mine
        return jax.lax.psum_scatter(mine, 'X', scatter_dimension=0, tiled=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)


def moe_all_to_all(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: my tokens, full rows
        tokens = a.shape[0]
        b = b.reshape(tokens, -1)                               # [S/nX, k] (k = 1 for moe_all_to_all)
        k = b.shape[1]
        expert = b.reshape(-1)                                  # one entry per (token, choice) pair
        token = jnp.repeat(jnp.arange(tokens), k)
        nX, mine = jax.lax.axis_size('X'), w.shape[0]
        chunk = max(1, tokens // (2 * nX))                      # Broken: E/nX ignored

        dest = expert // mine
        order = jnp.argsort(dest)                               # pairs grouped by destination
        counts = jnp.bincount(dest, length=nX)
        starts = jnp.cumsum(counts) - counts
        rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')   # the busiest pair decides
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), ('X', 'Y'), to='varying')

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)[None, :]        # [nX, chunk]
            valid = pos < counts[:, None]
            pair = order[jnp.minimum(starts[:, None] + pos, expert.shape[0] - 1)]
            x = jnp.where(valid[..., None], a[token[pair]], 0)  # [nX, chunk, D]
            e = jnp.where(valid, expert[pair] % mine, mine)     # `mine` marks an empty slot
            x = jax.lax.all_to_all(x, 'X', 0, 0)                # row i now holds what device i sent
            e = jax.lax.all_to_all(e, 'X', 0, 0)
            y = moe_local(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
            y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0)   # results go home
            y = jnp.where(valid[..., None], y, 0) / k
            return r + 1, out.at[token[pair]].add(y)

        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)


def moe_all_to_all_x(W, A, B, *, mesh):
    def grouped(w, x, e):
        """x[i] @ w[e[i]] with jax.lax.ragged_dot; rows with e outside [0, E) give zeros."""
        order = jnp.argsort(e)                                  # rows grouped by expert, empties last
        sizes = jnp.bincount(e, length=w.shape[0] + 1)[:-1].astype(jnp.int32)
        y = jax.lax.ragged_dot(x[order], w, sizes)              # rows past sum(sizes) come out zero
        return jnp.zeros_like(y).at[order].set(y)

    def local(w, a, b):                                         # w: [E/nX, D, F], a: [S/nX, D]
        tokens, nX, mine = a.shape[0], jax.lax.axis_size('X'), w.shape[0]
        chunk = max(1, tokens // (2 * nX))                      # Broken: E/nX ignored
        dest = b // mine
        order = jnp.argsort(dest)                               # my tokens grouped by destination
        counts = jnp.bincount(dest, length=nX)
        starts = jnp.cumsum(counts) - counts
        rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), 'X', to='varying')

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)[None, :]        # [nX, chunk]
            valid = pos < counts[:, None]
            token = order[jnp.minimum(starts[:, None] + pos, tokens - 1)]
            x = jax.lax.all_to_all(jnp.where(valid[..., None], a[token], 0), 'X', 0, 0)
            e = jax.lax.all_to_all(jnp.where(valid, b[token] % mine, mine), 'X', 0, 0)
            y = grouped(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
            y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0)
            return r + 1, out.at[token].add(jnp.where(valid[..., None], y, 0))

        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)
