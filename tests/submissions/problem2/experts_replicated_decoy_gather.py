"""moe_allgather and moe_allgather_x: W's in_specs replicated over X, so jax.jit gathers every
expert onto every row at the shard_map's boundary; the body's all_gather of the tokens over X
is a decoy (each device gathers every token, then slices its own block back out and multiplies
only its own tokens by all experts). The tokens never really travel to the experts."""
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P

def _local(W, A, B):
    def one(out, e):
        return out + jnp.where((B == e)[:, None], A @ W[e], 0), None
    return jax.lax.scan(one, jnp.zeros_like(A @ W[0]), jnp.arange(W.shape[0]))[0]

def _mine(a_all, T):
    i = jax.lax.axis_index('X')
    return jax.lax.dynamic_slice_in_dim(a_all, i * T, T, 0)

def moe_local(W, A, B):
    return _local(W, A, B)

def moe_allgather(W, A, B, *, mesh):
    def local(w, a, b):
        a = jax.lax.all_gather(a, 'Y', axis=1, tiled=True)
        T = a.shape[0]
        a = _mine(jax.lax.all_gather(a, 'X', axis=0, tiled=True), T)   # decoy gather of the tokens
        return _local(w, a, b)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(None, None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)

def moe_allgather_x(W, A, B, *, mesh):
    def local(w, a, b):
        T = a.shape[0]
        a = _mine(jax.lax.all_gather(a, 'X', axis=0, tiled=True), T)   # decoy gather of the tokens
        return _local(w, a, b)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(None, None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)
