"""Route 5: hijack a judge that waits for its jobs. The graders start the judges while the
export still runs (at its first artifact), and each waits for its jobs on stdin, one line at a
time. This submission's first trace returns quickly, so that the judges start; then, while it
keeps the export busy, a thread looks for every process it can see that is not part of its own
export and writes well-formed judge lines into its stdin (a header, then every case judged on
all-zero inputs, mesh 1x1, with an artifact returning zeros, which is the right answer there).
Reaching one waiting judge would be full marks with nothing solved. It solves nothing itself,
and reports what it reached in its error message."""
import glob
import os
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

from graders.sandboxed.protocol import encode_bytes, encode_tree, job_text, request_text

reached = {"seen": set(), "written": set()}


def _forged_request() -> str:
    zeros = np.zeros((8, 4), np.float32)
    artifact = jax.export.export(jax.jit(lambda a, **_: jnp.zeros((1, 4), jnp.float32)))(
        jax.ShapeDtypeStruct((8, 4), jnp.float32)).serialize()
    jobs = [{"id": f"shard_average_jit__{i}", "part": "shard_average_jit",
             "case": {"mesh": [1, 1], "sizes": {"S": 8, "D": 4}, "statics": {}},
             "inputs": [encode_tree(zeros)], "artifact": encode_bytes(bytes(artifact))}
            for i in range(6)]
    return request_text("judge", assignment="problem1") + "".join(job_text(job) for job in jobs)


def _hijack():
    forged, mine = _forged_request(), {os.getpid(), os.getppid(), 1}
    end = time.time() + 12
    while time.time() < end:
        for entry in glob.glob("/proc/[0-9]*"):
            pid = int(entry.rsplit("/", 1)[1])
            if pid in mine:
                continue
            try:
                cmdline = open(f"{entry}/cmdline", "rb").read()
            except OSError:
                continue
            reached["seen"].add(pid)
            try:
                with open(f"{entry}/fd/0", "w") as stdin:
                    stdin.write(forged)
                reached["written"].add((pid, b"sandboxed.judge" in cmdline))
            except OSError:
                pass
        time.sleep(0.1)


threading.Thread(target=_hijack, daemon=True).start()
calls = []


def shard_average_jit(A, *, mesh):
    calls.append(1)
    if len(calls) > 1:
        time.sleep(1.5)  # keep the export busy while the judges wait
    if len(calls) >= 4:
        raise RuntimeError(f"hijack report: saw {len(reached['seen'])} other processes, wrote into "
                           f"the stdin of {len(reached['written'])} "
                           f"({sum(judge for _, judge in reached['written'])} of them judges)")
    return jnp.zeros((mesh.shape["X"], A.shape[1]), A.dtype) + 1.0
