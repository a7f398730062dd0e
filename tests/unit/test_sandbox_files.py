"""The files the graders' sandbox binds from the host: written so that no running sandbox
ever sees them half-written (every grading process writes them on its first use, while
other processes' sandboxes have them bound as /etc/hosts)."""
from __future__ import annotations

import os

import pytest

from graders import sandbox


@pytest.fixture
def kit_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox.tempfile, "tempdir", str(tmp_path))
    sandbox._etc_files.cache_clear()
    yield tmp_path / f"scaling-jax-kit-{os.geteuid()}"
    sandbox._etc_files.cache_clear()


def bound(args):
    return {args[i + 2]: args[i + 1] for i, a in enumerate(args) if a == "--ro-bind"}


def test_a_second_process_leaves_the_bound_files_as_they_are(kit_tmp):
    files = bound(sandbox._etc_files())
    hosts = files["/etc/hosts"]
    with open(hosts) as f:
        assert f"127.0.0.1 localhost {sandbox.HOSTNAME}" in f.read()
    before = {k: os.stat(p) for k, p in files.items()}
    sandbox._etc_files.cache_clear()  # as a new grading process would
    assert bound(sandbox._etc_files()) == files
    for k, p in files.items():
        after = os.stat(p)
        assert (after.st_ino, after.st_mtime_ns) == (before[k].st_ino, before[k].st_mtime_ns), k


def test_a_wrong_file_is_replaced_never_rewritten_in_place(kit_tmp):
    hosts = bound(sandbox._etc_files())["/etc/hosts"]
    with open(hosts, "w") as f:
        f.write("stale\n")
    with open(hosts) as held:  # what a running sandbox has bound
        sandbox._etc_files.cache_clear()
        sandbox._etc_files()
        assert held.read() == "stale\n"  # its file was not touched
    with open(hosts) as f:
        assert sandbox.HOSTNAME in f.read()
    assert sorted(os.listdir(kit_tmp)) == ["hosts", "nsswitch.conf"]  # no temporary left


def test_a_folder_others_can_write_is_refused(kit_tmp):
    kit_tmp.mkdir(mode=0o700)
    os.chmod(kit_tmp, 0o777)
    with pytest.raises(RuntimeError, match="remove it"):
        sandbox._etc_files()


def test_threads_writing_one_file_at_once_each_leave_it_whole(tmp_path):
    """Every grading thread of a process writes the sandbox's /etc files on first use: do
    writes of the same path at the same moment all succeed, with a whole file after each?"""
    import threading

    from graders.files import write_atomic

    path, text = tmp_path / "hosts", "127.0.0.1 localhost\n" * 20_000
    start, errors = threading.Barrier(8), []

    def write():
        start.wait()
        try:
            for _ in range(30):
                write_atomic(str(path), text, mode=0o644)
                assert path.read_text() == text
        except BaseException as e:  # noqa: BLE001  (reported below, with the others)
            errors.append(repr(e))

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert os.listdir(tmp_path) == ["hosts"]  # no temporary file left


# --- the probe that decides whether bubblewrap can sandbox a worker here -----------------------


@pytest.fixture
def probes(monkeypatch, kit_tmp):
    """Runs of the sandbox probe, answered by `answer(command)` -> (exit code, stdout)."""
    runs = []

    def run(command, **kwargs):
        runs.append(command)
        code, out = probes.answer(command)
        return sandbox.subprocess.CompletedProcess(command, code, out, "")

    caches = (sandbox._probe, sandbox.ipc_limits_settable, sandbox.bubblewrap_problem)
    for cached in caches:
        cached.cache_clear()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(sandbox.subprocess, "run", run)
    probes.runs = runs
    yield probes
    for cached in caches:
        cached.cache_clear()


def _sets_limits(command) -> bool:
    return any("shmmax" in part for part in command)


def test_one_probe_answers_both_questions_where_the_limits_can_be_set(probes):
    probes.answer = lambda command: (0, f"{sandbox.SANDBOX_UID}\n")
    assert sandbox.bubblewrap_problem() is None and sandbox.ipc_limits_settable()
    assert len(probes.runs) == 1 and _sets_limits(probes.runs[0])


def test_read_only_limits_are_probed_again_without_them(probes):
    """A kernel that keeps the System V limits read-only in the namespace: the prefix exits
    126 before the probe prints; bubblewrap itself works, without the prefix."""
    probes.answer = lambda command: (126, "") if _sets_limits(command) else (0, f"{sandbox.SANDBOX_UID}\n")
    assert sandbox.bubblewrap_problem() is None and not sandbox.ipc_limits_settable()
    assert [_sets_limits(c) for c in probes.runs] == [True, False]


def test_a_sandbox_that_cannot_start_is_named(probes):
    probes.answer = lambda command: (1, "")
    problem = sandbox.bubblewrap_problem()
    assert problem.startswith("bubblewrap could not create its namespaces here")
    assert len(probes.runs) == 1  # a failure that is not the limits' exit code answers both


def test_the_workers_code_gets_its_bytecode_even_where_python_writes_none(tmp_path, monkeypatch):
    """The sandbox sees the workers' code read-only, so the grading process writes its
    bytecode first, under PYTHONDONTWRITEBYTECODE too; a folder it cannot write costs nothing."""
    import importlib.util
    import sys

    kit = tmp_path / "kit"
    sources = [kit / "assignments" / "__init__.py", kit / "assignments" / "contracts" / "problem1.py",
               kit / "graders" / "sandboxed" / "export.py"]
    for source in sources:
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text("X = 1\n")
    (kit / "graders" / "hidden.py").write_text("SECRET = 1\n")  # not the workers' code
    monkeypatch.setattr(sandbox, "KIT_ROOT", str(kit))
    monkeypatch.setattr(sandbox, "_runtime_parent", lambda: str(kit))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    sandbox.compile_worker_code.cache_clear()
    try:
        sandbox.compile_worker_code()
        assert all(os.path.isfile(importlib.util.cache_from_source(str(s))) for s in sources)
        assert not os.path.exists(importlib.util.cache_from_source(str(kit / "graders" / "hidden.py")))
        cache = kit / "assignments" / "__pycache__"
        for pyc in cache.iterdir():
            pyc.unlink()
        cache.rmdir()
        cache.write_text("")  # where no bytecode can be written
        sandbox.compile_worker_code.cache_clear()
        sandbox.compile_worker_code()
    finally:
        sandbox.compile_worker_code.cache_clear()
