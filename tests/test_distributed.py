"""Reference solutions on a real multi-controller runtime: 2 processes x 4 CPU devices, gloo."""
from __future__ import annotations

import functools
import os

import jax
import numpy as np
import pytest
from grading import load_module
from jax.sharding import NamedSharding

from assignments.contracts import get_assignment
from assignments.evaluate import make_mesh, place
from graders.distributed import free_port, run_distributed
from graders.hidden import case_seed, hidden_cases, hidden_inputs

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSIGNMENTS = ["problem1"]
"""Assignments whose every reference solution is run this way."""


def load_solutions(name: str):
    return load_module(os.path.join(REPO_ROOT, "solutions", f"{name}.py"))


def export(fn, part, case, mesh) -> bytes:
    specs = [jax.ShapeDtypeStruct(a.shape(case), a.dtype, sharding=NamedSharding(mesh, a.partition_spec))
             for a in part.args]
    kwargs = part.call_kwargs(mesh, case.statics) if hasattr(part, "call_kwargs") else \
        {"mesh": mesh, **case.statics}
    return bytes(jax.export.export(jax.jit(functools.partial(fn, **kwargs)))(*specs).serialize())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_solutions_match_one_process(assignment, tmp_path):
    """Does every reference solution, exported and run on 2 processes of 4 devices each
    (jax.distributed, gloo collectives), give the values and sharding of one process?"""
    spec = get_assignment(assignment)
    solutions = load_solutions(assignment)
    cases = hidden_cases(spec)
    jobs, single = [], {}
    for part in spec.parts:
        if part.eager:
            continue
        for i, case in enumerate(cases[part.name]):
            if case.mesh[0] * case.mesh[1] != 8:
                continue
            cid = f"{part.name}__{i}"
            mesh = make_mesh(case.mesh, getattr(part, "axis_types", "auto"))
            blob = export(getattr(solutions, part.name), part, case, mesh)
            (tmp_path / f"{cid}.jaxexport").write_bytes(blob)
            arrays = hidden_inputs(spec, part, case, case_seed(spec.name, part.name, i))
            exported = jax.export.deserialize(bytearray(blob))
            out = jax.jit(exported.call)(*place(arrays, part, mesh))
            single[cid] = (np.asarray(out), str(out.sharding.spec))
            inputs = []
            for k, a in enumerate(arrays):
                inputs.append(str(tmp_path / f"{cid}.in{k}.npy"))
                np.save(inputs[-1], a)
            jobs.append({"id": cid, "file": str(tmp_path / f"{cid}.jaxexport"), "mesh": list(case.mesh),
                         "axis_types": getattr(part, "axis_types", "auto"), "inputs": inputs,
                         "specs": [list(a.spec) for a in part.args]})
    graded = {j["id"].split("__")[0] for j in jobs}
    assert graded == {p.name for p in spec.parts if not p.eager}, "a function has no 8-device case"

    results = run_distributed(jobs, str(tmp_path), processes=2, local_devices=4)
    assert set(results) == set(single)
    for cid, (want, want_spec) in single.items():
        r = results[cid]
        assert r["status"] == "ok", (cid, r)
        assert (r["processes"], r["devices"]) == (2, 8)
        got = np.load(r["output"])
        assert got.shape == want.shape and got.dtype == want.dtype, cid
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=cid)
        assert r["spec"] == want_spec, cid


def test_the_readme_command_runs_as_written(repo_root, capsys):
    """Does the README's `python -m graders.distributed` line parse and run as written (its
    options once collided with the sandbox's --processes), here on one function: the
    solution's own artifacts run on the runtime with right values, and cases that need fewer
    devices skipped?"""
    from graders.distributed import main

    readme = open(os.path.join(repo_root, "README.md")).read()
    line = "python -m graders.distributed solutions/problem1.py -a problem1"
    assert line in readme
    cwd = os.getcwd()
    os.chdir(repo_root)
    try:
        assert main(line.split()[3:] + ["--only", "roll_diff"]) == 0
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "problem1 on 2 processes x 4 CPU devices" in out
    assert "does not use all 8 devices" in out and "│ ok " in out and "wrong" not in out


def test_free_port_is_free():
    """Is the coordinator's port one nothing listens on (chosen at run time, not fixed)?"""
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_process_that_dies_ends_the_run_with_its_log(tmp_path, monkeypatch):
    """When one process of the runtime fails (here process 1 exits at once, process 0 would
    wait a minute at the coordinator), does the run end at once and name what it printed,
    instead of running into its timeout?"""
    import sys

    import graders.distributed as distributed

    script = ("import json, sys, time; r = json.load(open(sys.argv[1]))\n"
              "if r['process_id'] == 1: print('gloo could not resolve the host'); sys.exit(3)\n"
              "time.sleep(60)")
    monkeypatch.setattr(distributed, "python_command", lambda _: [sys.executable, "-I", "-c", script])
    job = {"id": "f__0", "file": str(tmp_path / "f__0.jaxexport"), "mesh": [4, 2], "inputs": [], "specs": []}
    results = run_distributed([job], str(tmp_path), processes=2, local_devices=4, timeout=50)
    message = results["f__0"]["message"]
    assert results["f__0"]["status"] == "error"
    assert "did not finish" not in message, message
    assert "process 1: gloo could not resolve the host" in message, message
