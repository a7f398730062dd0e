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
