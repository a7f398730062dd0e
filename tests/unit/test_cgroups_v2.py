"""The cgroup v2 path of `graders.cgroups`, on a folder laid out like /sys/fs/cgroup.

These machines mount cgroup v2 without a memory controller, so the kernel's side cannot be
exercised here; this checks the kit's side: which files it writes, in which order, where."""
from __future__ import annotations

import os

import pytest

from graders import cgroups


@pytest.fixture
def fake_v2(tmp_path, monkeypatch):
    """A v2 hierarchy with memory and pids, the grader in /grader with two processes and no
    controllers handed down yet."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    grader = tmp_path / "grader"
    grader.mkdir()
    (grader / "cgroup.controllers").write_text("memory pids\n")
    (grader / "cgroup.subtree_control").write_text("")
    (grader / "cgroup.procs").write_text("101\n102\n")
    monkeypatch.setattr(cgroups, "ROOT", str(tmp_path))
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": "/grader"})
    return grader


def test_a_worker_group_is_made_after_the_controllers_are_handed_down(fake_v2, monkeypatch):
    """Do the grader's processes move into the leaf before its group hands memory and pids to
    its children, and is the worker's group a sibling of the leaf, with its limits written?"""
    moved = []
    real_write = cgroups._write

    def write(path, value):
        if path.endswith(os.path.join(cgroups.LEAF, "cgroup.procs")):
            moved.append(str(value))
        if path.endswith("subtree_control"):
            assert moved == ["101", "102"], "controllers handed down while the group held processes"
        real_write(path, value)

    monkeypatch.setattr(cgroups, "_write", write)
    worker = cgroups._make("w1", 2**30, 64)
    assert (fake_v2 / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert worker.folders["memory"] == str(fake_v2 / "w1")
    assert (fake_v2 / "w1" / "memory.max").read_text() == str(2**30)
    assert (fake_v2 / "w1" / "memory.swap.max").read_text() == "0"


def test_after_the_move_the_grader_still_makes_groups_beside_its_leaf(fake_v2, monkeypatch):
    """Once the grader runs in the leaf (/proc/self/cgroup says so), are worker groups still made
    in its old group, and is nothing moved twice?"""
    cgroups._make("w1", 2**30, 64)
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": f"/grader/{cgroups.LEAF}"})
    (fake_v2 / "cgroup.subtree_control").write_text("memory pids\n")
    os.remove(fake_v2 / cgroups.LEAF / "cgroup.procs")
    worker = cgroups._make("w2", 2**30, 64)
    assert worker.folders["memory"] == str(fake_v2 / "w2")
    assert not (fake_v2 / cgroups.LEAF / "cgroup.procs").exists()
