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


def test_the_graders_parent_never_loads_jax():
    """Does the grading parent (contracts, hidden cases and inputs, the pytest plugin, the
    verdict cache) run without importing JAX (only the sandboxed workers need it: a second
    JAX start-up per submission would cost half a second), while `from assignments import
    check` still works in a notebook?"""
    proc = run_python(
        "import sys\n"
        "import graders.run, graders.pytest_plugin, graders.verdicts\n"
        "from graders.hidden import hidden_cases, hidden_inputs\n"
        "from assignments.contracts import ASSIGNMENTS\n"
        "for a in ASSIGNMENTS.values():\n"
        "    cases = hidden_cases(a)\n"
        "    for part in a.parts:\n"
        "        hidden_inputs(a, part, cases[part.name][0], 1)\n"
        "assert 'jax' not in sys.modules, 'the parent loaded JAX'\n"
        "from assignments import check, make_mesh\n"
        "assert 'jax' in sys.modules and callable(check) and callable(make_mesh)\n"
        "print('ok')")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
