"""The student-side runtime of the course kit.

Import it first in every notebook::

    import assignments
    assignments.setup_devices(8)   # before anything else touches JAX

Public API:
- `setup_devices(n)`: simulate n CPU devices (before JAX starts).
- `make_mesh((nX, nY))`: the course's ('X', 'Y') mesh, in Auto mode.
- `show_mesh(mesh)`, `show_sharding(x)`: pictures of meshes and array layouts.
- `report(fn, *args)`: the table of collectives `jax.jit(fn)` compiles to.
- `check(fn)`: the visible check of a graded function.
- `compare({name: fn}, *args, chip=...)`: programs side by side with estimated times
  (`assignments.costs`: the book's chip constants and ring formulas).
- `analyze(compiled, mesh)`: the HLO analysis behind all of the above.
"""
from .checks import CheckFailed, CheckResult, check, compare, hint_name_errors, is_implemented, report
from .devices import TooLateError, setup_devices
from .display import communication_table, show_mesh, show_sharding
from .evaluate import make_mesh
from .hlo import Collective, ProgramAnalysis, analyze

__all__ = [
    "CheckFailed", "CheckResult", "Collective", "ProgramAnalysis", "TooLateError", "analyze", "check", "compare",
    "is_implemented",
    "communication_table", "make_mesh", "report", "setup_devices", "show_mesh", "show_sharding",
]

hint_name_errors()  # in a notebook: a NameError also says "run the cells above, set-up first"
