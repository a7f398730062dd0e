"""The notebook's set-up: simulated devices (JAX sees N CPU devices if asked before its
backend starts), and a hint on NameErrors for cells run out of order.

It imports nothing heavy: the graders' parent process imports the `assignments` package
without ever loading JAX."""
from __future__ import annotations

import os
import sys

DEFAULT_DEVICES = 8


_set_up = False
"""Whether `setup_devices` ran in this process (the notebook's set-up cell, or a check)."""


class TooLateError(RuntimeError):
    """JAX's backend already started with fewer devices than asked for."""


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # a JAX without this private helper: assume not started
        return False


def setup_devices(n: int = DEFAULT_DEVICES, *, announce: bool = False) -> int:
    """Ask JAX for `n` simulated CPU devices and return how many it has.

    Must run before the first JAX computation (the backend reads the device count
    once, when it starts). Calling it again later is fine if JAX already has at least
    `n` devices; otherwise it raises `TooLateError` saying how to fix it.
    On a machine with real accelerators the CPU setting is ignored and the real
    devices are used. With `announce` (the notebooks' set-up cell) it prints one line
    saying which devices are ready (`devices_ready()`).
    """
    global _set_up
    import jax

    if not _backend_started():
        jax.config.update("jax_num_cpu_devices", n)
        # Older mechanism too, for subprocesses that start their own JAX.
        flag = f"--xla_force_host_platform_device_count={n}"
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " " + flag).strip()
    have = jax.device_count()
    if have < n:
        raise TooLateError(
            f"JAX already started with {have} device(s), but this needs {n}. "
            f"The device count is fixed when JAX first runs a computation. "
            f"Fix: restart the kernel (Kernel > Restart Kernel) and run "
            f"`assignments.setup_devices({n})` before anything else touches JAX, "
            f"or start Python with JAX_NUM_CPU_DEVICES={n} set in the environment."
        )
    _set_up = True
    if announce:
        print(devices_ready())
    return have


def devices_ready() -> str:
    """One short line: how many devices JAX has, of which kind, e.g. '8 simulated CPU devices
    ready (JAX 0.10.2), ids 0-7'."""
    import jax

    devices = jax.devices()
    kind = "simulated CPU" if devices[0].platform == "cpu" else devices[0].device_kind
    ids = sorted(d.id for d in devices)
    return f"{len(devices)} {kind} devices ready (JAX {jax.__version__}), ids {ids[0]}-{ids[-1]}"


# Two short lines each: JupyterLab wraps a long line of an error anywhere, even inside a word.
NAME_HINT = ("Hint: names come from cells run earlier. After a kernel restart, run the notebook\n"
             "from the top (the set-up cell first): Run > Run All Above Selected Cell.")
NO_SETUP_HINT = ("Hint: the set-up has not run yet. Run the notebook's first cell (the set-up) first;\n"
                 "after a kernel restart, run it again. Then the cells above: Run > Run All Above Selected Cell.")


def name_hint() -> str:
    """The hint a NameError gets: the set-up cell first when it has not run in this kernel."""
    return NAME_HINT if _set_up else NO_SETUP_HINT


def hint_name_errors() -> None:
    """In a notebook kernel, add a hint to every NameError: run the set-up cell first (when it
    has not run in this kernel), or the cells above. Installed once, by `import assignments`
    (the hand-out's kernels import it as an IPython extension when they start, so the hint is
    there before the set-up cell ran); leaves a kernel that already has its own handler for
    exceptions alone."""
    ipython = sys.modules.get("IPython")  # a kernel has it loaded; nobody else needs it
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell" or shell.custom_exceptions:
        return

    def handler(shell, etype, value, tb, tb_offset=None):
        notes = getattr(value, "__notes__", [])
        if NAME_HINT not in notes and NO_SETUP_HINT not in notes:
            value.add_note(name_hint())
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)

    shell.set_custom_exc((NameError,), handler)
