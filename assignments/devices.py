"""Simulated devices: make JAX see N CPU devices, before its backend starts."""
from __future__ import annotations

import os

DEFAULT_DEVICES = 8


class TooLateError(RuntimeError):
    """JAX's backend already started with fewer devices than asked for."""


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # a JAX without this private helper: assume not started
        return False


def setup_devices(n: int = DEFAULT_DEVICES) -> int:
    """Ask JAX for `n` simulated CPU devices and return how many it has.

    Must run before the first JAX computation (the backend reads the device count
    once, when it starts). Calling it again later is fine if JAX already has at least
    `n` devices; otherwise it raises `TooLateError` saying how to fix it.
    On a machine with real accelerators the CPU setting is ignored and the real
    devices are used.
    """
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
    return have
