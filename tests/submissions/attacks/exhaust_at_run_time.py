"""Route 9: poison the verdict cache. A program that fails when run only because memory ran out
(here it asks for far more than any judge may have) must not leave a cached verdict behind: an
earlier artifact in the same judge process could have caused such a failure, and the cache
would then hand it to every later student whose artifact has the same bytes."""
import jax, jax.numpy as jnp
def shard_average_jit(A, *, mesh):
    big = jnp.sort(A[:, :1] * jnp.ones((1, 1 << 34), jnp.float32), axis=1)  # 64 GiB per row at run time
    return big[: mesh.shape["X"], : A.shape[1]]
