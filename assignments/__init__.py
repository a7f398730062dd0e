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
- `show_schedule(fn, *args, baseline=...)`: what each device sends, step by step, drawn on
  the mesh, with a timeline of the steps (`draw_schedule(analyses)` for analyses you have).
- `analyze(compiled, mesh)`: the HLO analysis behind all of the above.
- `explain("C001")`, `explain(roll_diff)`: what a rule checks and why, or a graded function's
  rules with their ids (`python -m assignments.rules` lists them all).

The names load on first use, so that importing the package (as the graders' parent process
does, for the contracts) does not load JAX.
"""
from .devices import TooLateError, hint_name_errors, setup_devices
from .lazy import lazy_names

_WHERE = {
    "CheckFailed": "checks", "CheckResult": "checks", "check": "checks", "compare": "checks",
    "is_implemented": "checks", "report": "checks",
    "communication_table": "display", "show_mesh": "display", "show_sharding": "display",
    "make_mesh": "evaluate",
    "Collective": "hlo", "ProgramAnalysis": "hlo", "analyze": "hlo",
    "draw_schedule": "schedule", "show_schedule": "schedule",
    "explain": "rulebook",
}

__all__ = sorted([*_WHERE, "TooLateError", "setup_devices"])


__getattr__, __dir__ = lazy_names(__name__, _WHERE)

hint_name_errors()  # in a notebook: a NameError also says "run the cells above, set-up first"


def load_ipython_extension(ipython) -> None:
    """`%load_ext assignments`: the NameError hint, in a kernel where no cell imported the kit
    yet. The hand-out's kernels load it when they start (etc/ipython/ipython_kernel_config.py),
    so a cell run before the set-up cell says to run the set-up cell first."""
    hint_name_errors()
