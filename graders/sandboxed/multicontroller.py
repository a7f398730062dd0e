"""One process of a multi-controller JAX runtime, run by `graders.distributed` in the graders'
sandbox (it runs a program compiled from student code).

Usage (inside the sandbox): python -c "from graders.sandboxed.multicontroller import main; main()" REQUEST.json
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np


def main() -> int:
    return worker(sys.argv[1])


def worker(request_path: str) -> int:
    """One process of the runtime (started by `graders.distributed.run_distributed`)."""
    with open(request_path) as f:
        request = json.load(f)
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", request["local_devices"])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=request["coordinator"],
                               num_processes=request["processes"], process_id=request["process_id"])
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec as P

    from assignments.evaluate import make_mesh

    lead = jax.process_index() == 0
    results = {}
    for job in request["jobs"]:
        try:
            with open(job["file"], "rb") as f:
                exported = jax.export.deserialize(bytearray(f.read()))
            mesh = make_mesh(tuple(job["mesh"]), job.get("axis_types", "auto"))
            arrays = []
            for path, spec in zip(job["inputs"], job["specs"]):
                value = np.load(path)
                sharding = NamedSharding(mesh, P(*[tuple(e) if isinstance(e, list) else e for e in spec]))
                arrays.append(jax.make_array_from_callback(value.shape, sharding,
                                                           lambda index, v=value: v[index]))
            out = jax.jit(exported.call)(*arrays)
            spec = getattr(out.sharding, "spec", None)
            gathered = np.asarray(multihost_utils.process_allgather(out, tiled=True))
            if lead:
                path = os.path.join(request["out_dir"], f"{job['id']}.distributed.npy")
                np.save(path, gathered)
                results[job["id"]] = {"status": "ok", "output": path, "spec": str(spec),
                                      "processes": jax.process_count(), "devices": jax.device_count()}
        except Exception as e:  # the same failure happens in every process: report it, go on
            results[job["id"]] = {"status": "error",
                                  "message": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
    multihost_utils.sync_global_devices("graders.distributed: done")
    if lead:
        with open(request["out_file"] + ".tmp", "w") as f:
            json.dump(results, f)
        os.replace(request["out_file"] + ".tmp", request["out_file"])
    jax.distributed.shutdown()
    return 0




if __name__ == "__main__":
    sys.exit(main())
