"""`python -m graders.batch --dask`: the same batch, graded by the workers of a Dask cluster.

The end-to-end test grades the same few submissions with the plain batch and on a local
Dask cluster of two worker processes (one of which dies mid-grading, as a machine would),
and checks the gradebooks agree and that a rerun keeps every grade.
"""
from __future__ import annotations

import concurrent.futures as cf
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest
from grading import submission_file

import graders.batch as batch
from graders.dask_grading import grade_shipped, secret_fingerprint
from graders.hidden import grading_secret, read_secret
from graders.results import PartResult, SubmissionResult, read_results
from graders.settings import Limits

pytestmark = pytest.mark.dask

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION = os.path.join(REPO_ROOT, "solutions", "problem1.py")
SUBMISSIONS = os.path.join(REPO_ROOT, "tests", "submissions")
FAST = ["--cell-timeout", "10", "--case-timeout", "10", "--stall-timeout", "30"]
ONLY = ["--only", "shard_average_jit", "roll_diff"]


def course(root) -> str:
    """alice and bob: the solution; carol: roll_diff wrong on large shifts; mallory: kills
    whatever it can reach."""
    folder = os.path.join(root, "submitted")
    os.makedirs(folder)
    for student, path in (("alice", SOLUTION), ("bob", SOLUTION),
                          ("carol", submission_file(os.path.join(SUBMISSIONS, "problem1", "slice_roll.py"))),
                          ("mallory", os.path.join(SUBMISSIONS, "attacks", "kill_grader.py"))):
        shutil.copy(path, os.path.join(folder, f"{student}.py"))
    return folder


def command(source, out, *extra) -> list[str]:
    return [sys.executable, "-m", "graders.batch", "-a", "problem1", str(source), "-o", str(out),
            *FAST, *ONLY, *extra]


def gradebook(out) -> dict[str, tuple]:
    """student -> (score per function..., total, status), from gradebook.csv."""
    with open(os.path.join(out, "gradebook.csv")) as f:
        return {r["student"]: (float(r["shard_average_jit"]), float(r["roll_diff"]), float(r["score"]),
                               r["status"]) for r in csv.DictReader(f)}


def kill_a_worker_mid_grading(batch_proc: subprocess.Popen, deadline: float) -> bool:
    """Kill, like a machine going down, one Dask worker process while it grades (its
    `python -m graders` process first, then the worker). True once done."""
    while batch_proc.poll() is None and time.monotonic() < deadline:
        try:
            for p in psutil.Process(batch_proc.pid).children(recursive=True):
                cmdline = p.cmdline()
                if cmdline[1:3] == ["-m", "graders"] and "batch-shipped-" in " ".join(cmdline):
                    worker = p.parent()
                    os.killpg(p.pid, signal.SIGKILL)  # its own session: the sandboxes die with it
                    worker.kill()
                    return True
        except (psutil.Error, ProcessLookupError):
            pass
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_the_local_cluster_listens_on_loopback_only():
    """Dask's protocol is unauthenticated and runs what it is sent: do the scheduler and the
    workers `--dask` starts listen on 127.0.0.1 only, never on an address others can reach?"""
    from graders.dask_grading import dask_client

    with dask_client(None, 1) as client:
        addresses = [client.scheduler.address, *client.scheduler_info()["workers"]]
    assert addresses and all(a.startswith("tcp://127.0.0.1:") for a in addresses), addresses


def test_dask_cluster_gives_the_plain_batch_gradebook(tmp_path):
    """Graded on a local Dask cluster of two worker processes, one of which is killed in the
    middle of a grading, do the submissions get exactly the plain batch's grades, and does
    a rerun keep them all?"""
    source = course(tmp_path)
    plain, dask = tmp_path / "plain", tmp_path / "dask"
    proc = subprocess.run(command(source, plain, "--workers", "2"), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = gradebook(plain)
    assert expected["alice"] == expected["bob"] == (2.0, 2.0, 4.0, "graded")
    assert expected["carol"][0] == 2.0 and 0 < expected["carol"][1] < 2.0
    assert expected["mallory"] == (0.0, 0.0, 0.0, "graded")

    started = time.monotonic()
    run = subprocess.Popen(command(source, dask, "--dask", "--workers", "2"), cwd=REPO_ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        killed = kill_a_worker_mid_grading(run, time.monotonic() + 600)
        output, _ = run.communicate(timeout=900)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output
    assert killed, "no grading was seen on a Dask worker"
    assert "dask: 2 worker(s)" in output and "4 graded" in output, output
    assert gradebook(dask) == expected
    for student in expected:
        with open(plain / student / "results.json") as f:
            want = json.load(f)
        with open(dask / student / "results.json") as f:
            got = json.load(f)
        assert [(t["name"], t["score"], t["output"]) for t in got["tests"]] == \
               [(t["name"], t["score"], t["output"]) for t in want["tests"]]
        mine, theirs = read_results(str(dask / student / "results.json")), read_results(str(plain / student / "results.json"))
        assert mine.provenance.sha256 == theirs.provenance.sha256
        assert mine.provenance.path == os.path.join(source, f"{student}.py")
    first = time.monotonic() - started

    stamps = {s: read_results(str(dask / s / "results.json")).provenance.graded_at for s in expected}
    proc = subprocess.run(command(source, dask, "--dask", "--workers", "2"), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 graded" in proc.stdout and "4 kept" in proc.stdout, proc.stdout
    assert "distributed." not in proc.stdout + proc.stderr, "Dask's INFO lines (start-up, shut-down) printed"
    kept = gradebook(dask)
    assert {s: row[:3] for s, row in kept.items()} == {s: row[:3] for s, row in expected.items()}
    assert {row[3] for row in kept.values()} == {"kept"}
    assert stamps == {s: read_results(str(dask / s / "results.json")).provenance.graded_at for s in expected}
    print(f"dask batch (with a worker killed) {first:.0f} s")


def test_the_worker_check_uses_the_grading_secret():
    """Is the fingerprint a worker checks that of the secret the graders use, different for
    another secret, and free of the secret itself?"""
    secret = grading_secret()
    assert read_secret() == secret
    mine = secret_fingerprint(secret)
    assert mine and mine != secret_fingerprint(secret + b"x")
    assert secret.decode(errors="replace") not in mine


def test_a_worker_with_another_secret_refuses_to_grade():
    """Does a Dask task refuse, before running anything, on a machine whose course secret is
    not the batch's (its inputs would differ)?"""
    result = SubmissionResult.from_json(grade_shipped("alice", "alice.py", b"raise SystemExit", "problem1",
                                                      Limits().values(), None, "0" * 16, 1))
    assert result.failure.graders_fault and "a different course secret" in result.failure.message


def test_a_task_that_fails_costs_a_retry_not_the_batch(tmp_path, monkeypatch):
    """When the task grading one submission keeps failing (e.g. its Dask worker dies each
    time), is it tried MAX_RETRIES more times and recorded as a grader failure, while the
    others are graded, with any executor passed to run_batch?"""
    source = tmp_path / "submitted"
    source.mkdir()
    for student in ("alice", "bob"):
        (source / f"{student}.py").write_text(f"# {student}\n")
    calls = {"alice": 0, "bob": 0}

    def fake_grade_one(student, path, assignment, limits, only, concurrent=1, scratch=None, trusted=None):
        calls[student] += 1
        if student == "bob":
            raise RuntimeError("the worker died")
        return SubmissionResult(assignment, path, [PartResult("shard_average_jit", 2, [])])

    monkeypatch.setattr(batch, "grade_one", fake_grade_one)
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = batch.run_batch(batch.discover(str(source), "problem1"), "problem1", str(tmp_path / "out"),
                                   only=["shard_average_jit"], executor=pool)
    status = {o.submission.student: o.status for o in outcomes}
    assert status == {"alice": "graded", "bob": "failed"}
    assert calls == {"alice": 1, "bob": 1 + batch.MAX_RETRIES}
    bob = read_results(str(tmp_path / "out" / "bob" / "results.json"))
    assert bob.failure.graders_fault and "RuntimeError: the worker died" in bob.failure.message
