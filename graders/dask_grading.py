"""Grading a batch on a Dask cluster: what a task carries and what a worker does with it.

Each task carries one submission's bytes (no shared filesystem needed) and the grading's
limits; the worker writes the bytes to its scratch space and grades them with
`graders.batch.grade_one`, in the same sandbox as on the instructor's machine. The course's
secret never travels: only a fingerprint, and a worker whose secret differs (or that has
none) refuses to grade rather than draw other hidden inputs.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import tempfile

from .results import SubmissionResult
from .settings import Limits


def secret_fingerprint(secret: bytes | None) -> str | None:
    """A short digest that tells whether two machines hold the same secret (it does not
    tell the secret)."""
    if secret is None:
        return None
    return hmac.new(secret, b"graders.batch: same course secret?", hashlib.sha256).hexdigest()[:16]


def grade_shipped(student: str, name: str | None, data: bytes | None, assignment: str,
                  limits_values: dict, only: list[str] | None, fingerprint: str | None,
                  concurrent: int) -> dict:
    """A Dask task: grade a submission sent as its file name and bytes, on this worker.
    Returns the result as JSON (`SubmissionResult.to_json`)."""
    from .batch import grade_one
    from .hidden import read_secret

    limits = Limits(**limits_values)
    if fingerprint is not None and secret_fingerprint(read_secret()) != fingerprint:
        import socket

        what = "no course secret" if read_secret() is None else "a different course secret"
        message = (f"the Dask worker on {socket.gethostname()} has {what}: copy the course's "
                   f".grading-secret into the kit there (or set KIT_GRADING_SECRET)")
        return SubmissionResult.failed(assignment, name or "", message, graders_fault=True, only=only).to_json()
    try:  # the worker's own scratch space, which Dask clears if the worker dies mid-grading
        from distributed import get_worker

        scratch = get_worker().local_directory
    except Exception:
        scratch = None
    with tempfile.TemporaryDirectory(prefix="batch-shipped-", dir=scratch) as tmp:
        path = None
        if data is not None:
            path = os.path.join(tmp, os.path.basename(name or f"{student}.py"))
            with open(path, "wb") as f:
                f.write(data)
        return grade_one(student, path, assignment, limits, only, concurrent, scratch=tmp).to_json()


def dask_client(scheduler: str | None, workers: int):
    """A Dask client: of a new `LocalCluster` of `workers` single-threaded processes
    (`scheduler` None or "local"), or of the scheduler at `scheduler`. Dask's protocol is
    unauthenticated and runs what it is sent, so a local cluster listens on loopback only
    (`tests/test_dask.py`); a cluster of several machines is the administrator's to keep on a
    private network or behind Dask's TLS (README)."""
    from distributed import Client

    if scheduler in (None, "local"):
        import logging

        return Client(n_workers=max(1, workers), threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR)
    return Client(scheduler, timeout="30s")


def is_dask_client(executor) -> bool:
    return type(executor).__module__.split(".")[0] == "distributed" and hasattr(executor, "scheduler_info")


def dask_dispatch(client, assignment: str, limits: Limits, only, concurrent: int):
    """(submit(submission) -> future, as_completed(futures)) on the Dask cluster."""
    import uuid

    from distributed import as_completed

    from .hidden import grading_secret

    fingerprint = secret_fingerprint(grading_secret())  # the course's (made here if it has none yet)

    def submit(s):
        name = os.path.basename(s.path) if s.path else None
        # pure=False and a fresh key: a retry is a new task, never the failed one's result
        return client.submit(grade_shipped, s.student, name, s.data(), assignment, limits.values(), only,
                             fingerprint, concurrent, pure=False,
                             key=f"grade-{s.student}-{uuid.uuid4().hex[:8]}")

    return submit, lambda futures: as_completed(list(futures))
