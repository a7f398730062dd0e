"""Every grading setting is declared once (`graders.settings.Limits`) and reaches every worker:
as command-line flags derived from it, from the course's grading_config.py, and across the
process boundary of `graders.batch`, where each grading is a `python -m graders` of its own."""
from __future__ import annotations

import argparse
import os
import re

import pytest

from graders.settings import Limits, add_arguments, add_log_level_argument, from_arguments

pytestmark = pytest.mark.stack_neutral  # the settings' plumbing

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(REPO_ROOT, "tests", "submissions", "probes", "limits_probe.py")
CHANGED = dict(cell_timeout=1.5, case_timeout=2.5, stall_timeout=40.0, run_timeout=30.0,
               submission_timeout=200.0, memory_gib=2.5, tmp_mib=96, processes=300, max_strikes=1,
               judges=1, submission_mib=16, notebook_depth=32, notebook_nodes=5_000, nbgrader_memory_gib=1.5,
               sandbox="bubblewrap")


def parse(argv: list[str]):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_every_setting_is_a_flag_and_crosses_a_process_boundary_whole():
    """Is every Limits field a command-line flag, and do a child's flags (`to_arguments`) give
    back exactly the parent's limits, every field changed from its default?"""
    fields = set(Limits.class_traits(config=True))
    assert fields == set(CHANGED), "a test value for every setting"
    changed = Limits(**CHANGED)
    assert all(getattr(changed, k) != getattr(Limits(), k) for k in fields)
    assert from_arguments(parse(changed.to_arguments())).values() == changed.values()
    assert from_arguments(parse(["--unsandboxed"])).sandbox == "none"


def test_the_course_config_sets_them_and_flags_override_it(tmp_path):
    """Does grading_config.py set a limit for every command, and a flag override it?"""
    config = tmp_path / "grading_config.py"
    config.write_text("c = get_config()\nc.Limits.case_timeout = 7.0\nc.Limits.tmp_mib = 128\n")
    limits = from_arguments(parse(["--config", str(config), "--tmp-mib", "64"]))
    assert limits.case_timeout == 7.0 and limits.tmp_mib == 64 and limits.cell_timeout == Limits().cell_timeout


def test_log_level_is_one_flag_in_any_case():
    """Does --log-level take a level in any case, refuse one that is none, and does the batch
    take the same flag?"""
    from graders.batch import _parser

    parser = argparse.ArgumentParser()
    add_log_level_argument(parser)
    assert parser.parse_args(["--log-level", "info"]).log_level == "INFO"
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "chatty"])
    assert _parser().parse_args(["submitted", "-a", "problem1", "--log-level", "debug"]).log_level == "DEBUG"


def test_a_batch_that_could_overcommit_memory_is_warned():
    """Is a batch whose workers could together hold more memory than the machine has (the limit
    is per worker) warned, with the two fixes named; and one that fits left alone?"""
    warning = Limits(memory_gib=10_000, judges=2).memory_warning(3)
    assert warning.startswith("up to 9 sandboxed workers (3 grading(s) at once, each an export and 2 judge(s))")
    assert "fewer --workers" in warning and "c.Limits.memory_gib" in warning
    assert Limits(memory_gib=0.01).memory_warning(1) is None


@pytest.mark.slow
def test_every_limit_takes_effect_in_the_worker(tmp_path):
    """Graded by `graders.batch` (each grading a child process, given the limits as flags), does
    a probe see each limit inside its sandbox: its address space, processes, file size, tmpfs
    and System V sizes; and do the cell limit, the case limit and a single strike act?"""
    from graders.batch import discover, run_batch

    folder = tmp_path / "submitted"
    folder.mkdir()
    (folder / "probe.py").write_text(open(PROBE).read().replace("{sleep_s}", "3"))
    limits = Limits(**CHANGED)
    (outcome,) = run_batch(discover(str(folder), "problem1"), "problem1", str(tmp_path / "graded"),
                           workers=1, limits=limits, only=["shard_average_jit", "roll_diff"])
    result = outcome.result
    report = result.part("shard_average_jit").output
    line = re.search(r"\): probe: (.*?); to see it, run check", report).group(1)  # the probe's own words
    found = dict(re.findall(r"(\w+)=(\d+)", line))
    assert found == {"as": str(10 * 1024), "nproc": "300", "fsize": "96", "tmp": "96", "scratch": "96",
                     "shm": "96", "shmmax": "96"}, report
    assert "ran longer than 1.5 s" in " ".join(result.messages)  # the first cell, cut at cell_timeout
    roll = result.part("roll_diff").output
    assert "took longer than 2.5 s" in roll or "ran longer than" in roll, roll
    assert "not traced: 1 earlier cases of roll_diff timed out" in roll, roll  # max_strikes = 1
