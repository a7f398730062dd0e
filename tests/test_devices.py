"""Simulated devices: set before JAX starts, and a clear message when it is too late."""
import subprocess
import sys


def run_python(code: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_fresh_process_gets_eight_devices():
    """Does setup_devices give 8 devices when it runs first?"""
    proc = run_python("import assignments; print(assignments.setup_devices(8))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "8"


def test_too_late_says_how_to_fix_it():
    """When JAX already started with 1 device, is the error clear about the fix?"""
    proc = run_python("import jax; jax.devices(); import assignments; assignments.setup_devices(8)")
    assert proc.returncode != 0
    assert "TooLateError" in proc.stderr
    assert "already started with 1 device" in proc.stderr
    assert "restart the kernel" in proc.stderr


def test_second_call_is_harmless():
    """Is calling setup_devices again after JAX started with enough devices fine?"""
    proc = run_python("import assignments; assignments.setup_devices(8); import jax; jax.devices(); "
                      "print(assignments.setup_devices(4))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "8"
