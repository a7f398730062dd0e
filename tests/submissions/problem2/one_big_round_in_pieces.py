"""One all-to-all round sized for all local tokens (one_big_round's chunk of S/nX pairs per
destination), written as nX blocks of [1, S/nX, D], one per destination, concatenated just
before the all_to_all and taken apart just after it, so that no array the program names is
[nX, S/nX, D]: the round still sends, and every device still holds, S*D elements at once. Where
one such round would break the 2x byte bound (an even routing), a lax.cond runs small rounds
instead; both branches are compiled, so the big round is in every program on nX >= 2.

Broken part: moe_all_to_all (memory rule only).
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def _rounds(w, a, b, chunk):
    tokens = a.shape[0]
    nX, mine = jax.lax.axis_size('X'), w.shape[0]
    dest = b // mine
    order = jnp.argsort(dest)
    counts = jnp.bincount(dest, length=nX)
    starts = jnp.cumsum(counts) - counts
    rounds = jax.lax.pmax(jnp.max(-(-counts // chunk)), 'X')
    out = jnp.zeros_like(a @ w[0])

    def one_round(state):
        r, out = state
        xs, es, toks, vals = [], [], [], []
        for j in range(nX):                                   # one block per destination, kept apart
            pos = r * chunk + jnp.arange(chunk)
            valid = pos < counts[j]
            tok = order[jnp.minimum(starts[j] + pos, tokens - 1)]
            xs.append(jnp.where(valid[:, None], a[tok], 0)[None])
            es.append(jnp.where(valid, b[tok] % mine, mine)[None])
            toks.append(tok); vals.append(valid)
        x = jax.lax.all_to_all(jnp.concatenate(xs, 0), 'X', 0, 0)
        e = jax.lax.all_to_all(jnp.concatenate(es, 0), 'X', 0, 0)
        ys = [moe_local(w, x[i], e[i])[None] for i in range(nX)]   # each source's block on its own
        y = jax.lax.all_to_all(jnp.concatenate(ys, 0), 'X', 0, 0)
        for j in range(nX):
            out = out.at[toks[j]].add(jnp.where(vals[j][:, None], y[j], 0))
        return r + 1, out

    return jax.lax.while_loop(lambda s: s[0] < rounds, one_round, (0, out))[1]


def moe_all_to_all(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        T, nX, G = a.shape[0], jax.lax.axis_size('X'), w.shape[0]
        small = max(1, T // (2 * max(nX, G)))
        if nX == 1:
            return _rounds(w, a, b, small)
        counts = jnp.bincount(b // G, length=nX)
        m = jax.lax.pmax(jnp.max(counts), 'X')
        big_ok = 2 * m >= T + 2                                # one round of T is within 2x of need
        return jax.lax.cond(big_ok, lambda w, a, b: _rounds(w, a, b, T),
                            lambda w, a, b: _rounds(w, a, b, small), w, a, b)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)
