"""A typical first attempt at problem2: the jit and all-gather versions right, three classic
mistakes elsewhere (each explained where it happens)."""
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P


def moe_local(W, A, B):
    # Mistake: W[B] copies one [D, F] expert matrix per token, an [S, D, F] value.
    return jnp.einsum("sd,sdf->sf", A, W[B])


def moe_jit(W, A, B, *, mesh):
    return jax.jit(moe_local, out_shardings=NamedSharding(mesh, P('X', 'Y')))(W, A, B)


def _my_experts(w, x, expert):
    """x[t] @ w[expert[t]], zero for experts outside [0, len(w)): one expert at a time."""
    def one_expert(out, e):
        return out + jnp.where((expert == e)[:, None], x @ w[e], 0), None

    return jax.lax.scan(one_expert, jnp.zeros_like(x @ w[0]), jnp.arange(w.shape[0]))[0]


def moe_allgather(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        a = jax.lax.all_gather(a, 'X', axis=0, tiled=True)
        b = jax.lax.all_gather(b, 'X', axis=0, tiled=True)
        mine = _my_experts(w, a, b - jax.lax.axis_index('X') * w.shape[0])
        return jax.lax.psum_scatter(mine, 'X', scatter_dimension=0, tiled=True)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)


def moe_all_to_all(W, A, B, *, mesh):
    # Mistake: one round with a fixed capacity per destination (1.5x the fair share);
    # tokens past it are silently dropped, so an overloaded expert loses tokens.
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        tokens, nX, mine = a.shape[0], jax.lax.axis_size('X'), w.shape[0]
        b = b.reshape(tokens, -1)
        k = b.shape[1]
        expert, token = b.reshape(-1), jnp.repeat(jnp.arange(tokens), k)
        capacity = -(-3 * tokens * k // (2 * nX))
        dest = expert // mine
        order = jnp.argsort(dest)
        counts = jnp.bincount(dest, length=nX)
        pos = (jnp.cumsum(counts) - counts)[:, None] + jnp.arange(capacity)[None, :]
        valid = jnp.arange(capacity)[None, :] < counts[:, None]
        pair = order[jnp.minimum(pos, expert.shape[0] - 1)]
        x = jax.lax.all_to_all(jnp.where(valid[..., None], a[token[pair]], 0), 'X', 0, 0)
        e = jax.lax.all_to_all(jnp.where(valid, expert[pair] % mine, mine), 'X', 0, 0)
        y = _my_experts(w, x.reshape(-1, x.shape[-1]), e.reshape(-1)).reshape(nX, capacity, -1)
        y = jnp.where(valid[..., None], jax.lax.all_to_all(y, 'X', 0, 0), 0) / k
        return jnp.zeros((tokens, w.shape[2]), a.dtype).at[token[pair]].add(y)

    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)


def moe_topk(W, A, B, *, mesh):
    # Mistake: the k outputs are added up, not averaged.
    return moe_all_to_all(W, A, B, mesh=mesh) * B.shape[1]
