"""What a student's exception means, in the kit's words: shared by the visible checks and the
export worker, so the notebook and the graders name the same fault.

- `not_implemented_message`: which function's `raise NotImplementedError()` stopped a graded
  function (its own stub, or a function it calls, such as `transformer_block` calling an
  unfinished `reducescatter_matmul`);
- `exception_hint`: what one of JAX's errors usually means in these exercises (an `out_specs`
  that promises a value is the same along an axis the program never reduced over; `jax.set_mesh`
  inside a graded function, which the checks and the graders trace with `jax.jit`).
"""
from __future__ import annotations

import re

UNFINISHED = "not implemented yet: replace `raise NotImplementedError()` with your code"


def raising_function(exc: BaseException) -> str:
    """The top-level function whose code raised `exc` (the innermost frame's qualified name up
    to its first dot: a nested ``local`` of ``allgather_matmul`` is ``allgather_matmul``)."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return getattr(code, "co_qualname", code.co_name).split(".")[0]


def not_implemented_message(exc: NotImplementedError, part_name: str, unfinished: str = UNFINISHED) -> str:
    """`unfinished` when the graded function's own code raised; when it was a function it
    calls, that function by name (the student fixes that one, not this one)."""
    callee = raising_function(exc)
    if not callee or callee == part_name or callee.startswith("<") or not callee.isidentifier():
        return unfinished
    return (f"not implemented yet: {part_name} calls {callee}, which still raises NotImplementedError; "
            f"finish {callee} first (its own check says what it needs)")


_REPLICATION = re.compile(r"out_specs .*replicated across mesh axis '(\w+)'", re.S)
_SET_MESH_IN_JIT = re.compile(r"set_mesh.*outside of .?jax\.jit", re.S)


def exception_hint(exc: BaseException) -> str:
    """A sentence to add after one of JAX's messages, or "" when the kit has nothing to add."""
    replicated = _REPLICATION.search(str(exc))
    if replicated:
        axis = replicated.group(1)
        return (f" The kit's reading: the value returned still differs between the devices along "
                f"{axis}, while out_specs says it is the same on all of them. In these exercises that "
                f"means the partial results were never added over {axis}: check the axis your psum "
                f"names. Turning check_vma off would hide this, not fix it")
    if _SET_MESH_IN_JIT.search(str(exc)):
        return (" The kit's reading: the checks and the graders trace your whole function with "
                "jax.jit, so a with jax.set_mesh(mesh) block inside it fails there even where a call of "
                "your own, outside jax.jit, works. Name the mesh in each sharding instead: "
                "NamedSharding(mesh, P(...)) for with_sharding_constraint, out_sharding= and reshard")
    return ""
