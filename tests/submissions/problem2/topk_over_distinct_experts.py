"""Top-k that sends each (token, expert) pair once, dropping repeats, and averages over the
distinct experts a token picked: right when a token's k experts are all different or all
the same, wrong when it repeats some of them (B[i] = [e, e, f]: (W[e] + W[f])/2, not
(2 W[e] + W[f])/3), as on the hidden 2x2 top-k routing with k = 3 over three experts.

Broken part: moe_topk. Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def moe_local(W, A, B):
    # The book's current answer: one expert at a time. Step e multiplies every token by W[e]
    # and keeps the rows routed to e, so no value is larger than [S, F]. Tokens whose expert
    # is outside [0, E) match no step and come out as zeros: the sharded versions rely on it.
    def one_expert(out, e):
        return out + jnp.where((B == e)[:, None], A @ W[e], 0), None

    start = jnp.zeros_like(A @ W[0])   # [S, F] zeros, typed like a product (also under shard_map)
    return jax.lax.scan(one_expert, start, jnp.arange(W.shape[0]))[0]


def moe_jit(W, A, B, *, mesh):
    return jax.jit(moe_local, out_shardings=NamedSharding(mesh, P('X', 'Y')))(W, A, B)


def moe_allgather(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: full rows
        a = jax.lax.all_gather(a, 'X', axis=0, tiled=True)      # [S, D]: every token
        b = jax.lax.all_gather(b, 'X', axis=0, tiled=True)      # [S]
        first = jax.lax.axis_index('X') * w.shape[0]            # my first expert
        mine = moe_local(w, a, b - first)                       # [S, F/nY], zero unless my expert
        return jax.lax.psum_scatter(mine, 'X', scatter_dimension=0, tiled=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)


def moe_all_to_all(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: my tokens, full rows
        tokens = a.shape[0]
        b = b.reshape(tokens, -1)                               # [S/nX, k] (k = 1 for moe_all_to_all)
        k = b.shape[1]
        expert = b.reshape(-1)                                  # one entry per (token, choice) pair
        token = jnp.repeat(jnp.arange(tokens), k)
        nX, mine = jax.lax.axis_size('X'), w.shape[0]
        chunk = max(1, tokens // (2 * max(nX, mine)))           # pairs per destination per round

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


def moe_topk(W, A, B, *, mesh):
    # Send each (token, expert) pair once: a token that picks the same expert twice needs its
    # product only once. Out[i] is then the mean over the distinct experts token i picked.
    # Broken: that mean differs from mean_j A[i] @ W[B[i, j]] when a token repeats some
    # experts but not all of them (B[i] = [0, 0, 1]: (W0 + W1)/2 instead of (2 W0 + W1)/3).
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)      # [S/nX, D]: my tokens, full rows
        tokens = a.shape[0]
        b = b.reshape(tokens, -1)                               # [S/nX, k]
        k = b.shape[1]
        j = jnp.arange(k)
        dup = jnp.any((b[:, :, None] == b[:, None, :]) & (j[None, None, :] < j[None, :, None]), axis=2)
        distinct = (k - dup.sum(1)).astype(a.dtype)             # [S/nX]
        expert = b.reshape(-1)
        token = jnp.repeat(jnp.arange(tokens), k)
        nX, mine = jax.lax.axis_size('X'), w.shape[0]
        chunk = max(1, tokens // (2 * max(nX, mine)))

        dest = jnp.where(dup.reshape(-1), nX, expert // mine)   # repeats go nowhere (last)
        order = jnp.argsort(dest)
        counts = jnp.bincount(dest, length=nX + 1)[:nX]
        starts = jnp.cumsum(counts) - counts
        rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')
        out = jax.lax.pcast(jnp.zeros((tokens, w.shape[2]), a.dtype), ('X', 'Y'), to='varying')

        def one_round(state):
            r, out = state
            pos = r * chunk + jnp.arange(chunk)[None, :]
            valid = pos < counts[:, None]
            pair = order[jnp.minimum(starts[:, None] + pos, expert.shape[0] - 1)]
            x = jnp.where(valid[..., None], a[token[pair]], 0)
            e = jnp.where(valid, expert[pair] % mine, mine)
            x = jax.lax.all_to_all(x, 'X', 0, 0)
            e = jax.lax.all_to_all(e, 'X', 0, 0)
            y = moe_local(w, x.reshape(-1, x.shape[-1]), e.reshape(-1))
            y = jax.lax.all_to_all(y.reshape(nX, chunk, -1), 'X', 0, 0)
            y = jnp.where(valid[..., None], y, 0) / distinct[token[pair]][..., None]
            return r + 1, out.at[token[pair]].add(y)

        return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)
