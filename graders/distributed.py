"""Run exported artifacts on a real multi-controller JAX runtime: several local processes.

    python -m graders.distributed SUBMISSION --assignment problem1 [--jax-processes 2] [--local-devices 4]

On a GPU or TPU cluster every host runs the same program under `jax.distributed`: each
process owns a few devices, arrays span processes, and collectives cross process boundaries
(see the book's chapter on programming TPUs in JAX,
https://jax-ml.github.io/scaling-book/jax-stuff/). This module takes that code path on one
CPU machine: it starts `processes` Python processes, each with `local_devices` CPU devices
(2 x 4 = the 8 devices of the course's meshes), joined by `jax.distributed.initialize` on a
coordinator port chosen free at run time, with gloo for the CPU collectives. Every process
deserializes the same `jax.export` artifact, builds its share of the global input arrays
(`jax.make_array_from_callback`), runs the program, and process 0 gathers the result.

Only cases whose mesh uses every device of the runtime can run this way (a program over a
sub-mesh would leave a process with no devices in it); the others are reported as skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from .cgroups import WorkerCgroup
from .sandbox import Resources, Slot, choose_isolation, isolated, limited, python_command
from .settings import Limits

SHARED = "/shared"
"""Where the sandbox sees the run's folder (artifacts, inputs, results)."""


def _inside(job: dict, work: str, shared: str) -> dict:
    """A job with its file paths as the sandbox sees them (the run's folder at `shared`)."""
    def moved(path):
        rel = os.path.relpath(path, work)
        if rel.startswith(".."):
            raise ValueError(f"{path} is outside the run's folder {work}")
        return os.path.join(shared, rel)

    return {**job, "file": moved(job["file"]), "inputs": [moved(p) for p in job["inputs"]]}


def _run_sandboxed(command: list[str], work: str, timeout: float, isolation, resources: Resources) -> str | None:
    """Run `command` in the graders' sandbox (and a memory cgroup of its own, where one can
    be made) with `work` writable (at /shared under bubblewrap); None when it ended well,
    else why not."""
    with Slot() as slot:
        if slot.uid is not None:
            for root, dirs, files in os.walk(work):
                for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                    os.chown(name, slot.uid, slot.uid)
        full, where = isolated(command, isolation, slot.uid, resources, work, shared=(work, SHARED))
        cgroup = WorkerCgroup.create(resources.memory_bytes, resources.processes)
        launch = limited(full, resources)
        proc = subprocess.Popen(cgroup.command(launch) if cgroup else launch, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=where)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"the processes did not finish within {timeout:g} s"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
            over = cgroup is not None and cgroup.oom_kills() > 0
            if cgroup is not None:
                cgroup.close()
    if over:
        return f"the processes used more than their memory limit of {resources.memory_bytes / 2**30:g} GiB"
    return None if proc.returncode == 0 else f"a process exited with code {proc.returncode}"


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now.

    Chosen below the kernel's ephemeral range (Linux: 32768-60999), not by binding port 0:
    a port the kernel hands out may be handed out again, to anything that binds port 0 (a
    Jupyter kernel's sockets, another test's server) before our server binds it.
    """
    low = _ephemeral_low()
    for _ in range(200):
        start = max(1024, low - 12000)
        port = start + secrets.randbelow(low - start)  # not `random`: a test may have seeded it
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free TCP port found on 127.0.0.1 below {low}")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return max(2048, int(f.read().split()[0]))
    except (OSError, ValueError, IndexError):
        return 32768


def run_distributed(jobs: list[dict], work: str, *, processes: int = 2, local_devices: int = 4,
                    timeout: float = 300.0, limits: Limits | None = None) -> dict[str, dict]:
    """Run each job on a `processes` x `local_devices` multi-controller runtime.

    A job is ``{"id", "file": artifact path, "mesh": [nX, nY], "axis_types": "auto",
    "inputs": [array paths (.npy)], "specs": [PartitionSpec entries per input]}``.
    Returns id -> ``{"status": "ok", "output": path of the gathered result (.npy),
    "spec": the result's PartitionSpec}`` or ``{"status": "error"|"skipped", "message"}``.
    """
    total = processes * local_devices
    results: dict[str, dict] = {}
    runnable = []
    for job in jobs:
        if int(np.prod(job["mesh"])) != total:
            results[job["id"]] = {"status": "skipped", "message": f"mesh {job['mesh'][0]}x{job['mesh'][1]} "
                                  f"does not use all {total} devices of the runtime"}
        else:
            runnable.append(job)
    if not runnable:
        return results
    # Every process runs a program compiled from student code: all of them run in one
    # sandbox (they talk over its own loopback), with `work` as its only writable folder.
    port = free_port()
    limits = limits or Limits()
    isolation = choose_isolation(limits.sandbox)
    # The processes share one sandbox: each may use what one grading worker may.
    resources = Resources.of(limits.replace(memory_gib=limits.memory_gib * processes,
                                            processes=limits.processes * processes))
    shared = SHARED if isolation.sandboxed else work
    out_file = os.path.join(shared, f"distributed-{time.monotonic_ns()}.json")
    launch = []
    for pid in range(processes):
        request = f"distributed-request-{pid}.json"
        with open(os.path.join(work, request), "w") as f:
            json.dump({"coordinator": f"127.0.0.1:{port}", "processes": processes, "process_id": pid,
                       "local_devices": local_devices, "jobs": [_inside(j, work, shared) for j in runnable],
                       "out_dir": shared, "out_file": out_file}, f)
        # A process that fails ends them all (`kill 0`: the shell's process group), where the
        # others would wait for it at the coordinator until the timeout.
        launch.append(f"{{ {shlex.join(python_command('graders.sandboxed.multicontroller:main'))} "
                      f"{shared}/{request} > {shared}/distributed-{pid}.log 2>&1 || kill 0; }} &")
    script = " ".join(launch) + " wait"
    failed = _run_sandboxed(["sh", "-c", script], work, timeout, isolation, resources)
    out_file = os.path.join(work, os.path.basename(out_file))
    if failed is None and os.path.exists(out_file):
        with open(out_file) as f:
            for cid, r in json.load(f).items():
                if "output" in r:  # a path inside the sandbox
                    r["output"] = os.path.join(work, os.path.basename(r["output"]))
                results[cid] = r
    else:
        tails = "; ".join(f"process {pid}: {_log_tail(os.path.join(work, f'distributed-{pid}.log'))}"
                          for pid in range(processes))
        for job in runnable:
            results[job["id"]] = {"status": "error", "message": f"{failed or 'no results'}: {tails}"}
    return results


def _log_tail(path: str, lines: int = 3, chars: int = 400) -> str:
    """The last lines a process of the runtime printed (written in the sandbox: read with care)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return " | ".join(text.strip().splitlines()[-lines:])[-chars:] or "(nothing printed)"


def check_submission(submission: str, assignment: str, *, processes: int = 2, local_devices: int = 4,
                     only: list[str] | None = None, limits: Limits | None = None) -> list[dict]:
    """Grade a submission as usual, then run its artifacts for the cases that use every
    device on the multi-controller runtime and compare with the float64 reference.
    Returns one row per case: function, case label, status, largest error, message."""
    from assignments.evaluate import _compare_values, check_call

    from .harness import case_id, grade_submission, selected_assignment
    from .hidden import case_seed, hidden_cases, hidden_inputs

    spec = selected_assignment(assignment, only)
    cases = hidden_cases(spec)
    rows = []
    with tempfile.TemporaryDirectory(prefix="distributed-") as work:
        artifacts = os.path.join(work, "artifacts")
        single = grade_submission(submission, assignment, only=only, keep_artifacts=artifacts, limits=limits)
        jobs, expected = [], {}
        for part in spec.parts:
            for i, case in enumerate(cases[part.name]):
                cid = case_id(part, i)
                path = os.path.join(artifacts, f"{cid}.jaxexport")
                if part.eager or not os.path.exists(path):
                    continue
                arrays = hidden_inputs(spec, part, case, case_seed(spec.name, part.name, i))
                inputs = []
                for k, a in enumerate(arrays):
                    inputs.append(os.path.join(work, f"{cid}.in{k}.npy"))
                    np.save(inputs[-1], a)
                jobs.append({"id": cid, "file": path, "mesh": list(case.mesh), "inputs": inputs,
                             "axis_types": getattr(part, "axis_types", "auto"),
                             "specs": [list(a.spec) for a in part.args]})
                statics = dict(case.statics)
                expected[cid] = (part, case, part.reference(*[a.astype(np.float64) for a in arrays],
                                                            mesh=case.mesh, **statics))
        results = run_distributed(jobs, work, processes=processes, local_devices=local_devices, limits=limits)
        single_ok = {(p.name, c.case.label): c.values_ok for p in single.parts for c in p.cases}
        for cid, (part, case, want) in expected.items():
            r = results.get(cid, {"status": "error", "message": "no result"})
            row = {"function": part.name, "case": case.label, "status": r["status"],
                   "message": r.get("message", ""), "single_process_values_ok": single_ok.get((part.name, case.label))}
            if r["status"] == "ok":
                got = np.load(r["output"])
                wrong = (f"wrong shape {got.shape}" if got.shape != want.shape
                         else _compare_values(got, np.asarray(want), False,
                                              "" if row["single_process_values_ok"] else check_call(part, case)))
                row["status"] = "wrong" if wrong else "ok"
                row["message"] = wrong or f"result at {r['spec']} on {r['processes']} processes"
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.distributed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submission")
    parser.add_argument("--assignment", "-a", required=True)
    # Not --processes: that is the sandbox's limit on a worker's processes (graders.settings).
    parser.add_argument("--jax-processes", type=int, default=2,
                        help="processes of the multi-controller runtime (jax.distributed)")
    parser.add_argument("--local-devices", type=int, default=4)
    parser.add_argument("--only", nargs="+", metavar="FUNCTION")
    from .settings import add_arguments, from_arguments

    add_arguments(parser)
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    rows = check_submission(args.submission, args.assignment, processes=args.jax_processes,
                            local_devices=args.local_devices, only=args.only, limits=from_arguments(args))
    table = Table(title=f"{args.assignment} on {args.jax_processes} processes x {args.local_devices} "
                        f"CPU devices (jax.distributed, gloo)")
    for column in ("function", "case", "status", "same verdict as one process", "detail"):
        table.add_column(column)
    for row in rows:
        same = (row["status"] == "ok") == bool(row["single_process_values_ok"])
        table.add_row(row["function"], row["case"], row["status"],
                      "yes" if same or row["status"] == "skipped" else "NO", row["message"][:80])
    Console(width=140).print(table)
    # Wrong values are a verdict; a failure to run, or a verdict unlike one process's, is not.
    return 0 if all(r["status"] == "skipped" or (r["status"] in ("ok", "wrong") and
                    (r["status"] == "ok") == bool(r["single_process_values_ok"])) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
