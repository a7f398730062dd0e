"""Top-k that sends each (token, expert) pair once, dropping repeats, and averages over the
distinct experts a token picked: right when a token's k experts are all different or all
the same, wrong when it repeats some of them (B[i] = [e, e, f]: (W[e] + W[f])/2, not
(2 W[e] + W[f])/3), as on the hidden 2x2 top-k routing with k = 3 over three experts.

Broken part: moe_topk. Every other function is the reference solution.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


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
