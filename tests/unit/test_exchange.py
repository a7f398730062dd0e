"""The exchange check (`graders/exchange.py`): each way another user could rearrange nbgrader's
exchange is named with the command that mends it, and the README's layout passes."""
from __future__ import annotations

import os
import pwd

import pytest

from graders.exchange import SET_UP, UnsafeExchange, exchange_problems, require_safe_exchange

COURSE = "scaling-jax"


@pytest.fixture
def exchange(tmp_path):
    """The README's layout, as the user running the tests: a sticky exchange, the course's
    folder theirs, nbgrader's folders in it with nbgrader's modes (inbound made sticky)."""
    root = tmp_path / "exchange"
    root.mkdir()
    os.chmod(root, 0o1777)
    for name, mode in (("", 0o755), ("outbound", 0o755), ("inbound", 0o3733), ("feedback", 0o711)):
        (root / COURSE / name).mkdir(exist_ok=True)
        os.chmod(root / COURSE / name, mode)
    return root


def problems(root, **kwargs) -> list[str]:
    return [str(p) for p in exchange_problems(str(root), COURSE, **kwargs)]


def test_the_readme_layout_is_safe(exchange):
    """Does the layout the README's set-up line and a release make pass?"""
    assert problems(exchange) == []
    require_safe_exchange(str(exchange), COURSE)


def test_nbgraders_own_mode_is_refused_naming_the_fix(exchange):
    """An exchange as nbgrader makes it (0777, no sticky bit): is it refused, saying what a
    student could do and the command that mends it?"""
    os.chmod(exchange, 0o777)
    [problem] = problems(exchange)
    assert "no sticky bit" in problem and "put one of their own in its place" in problem
    assert f"fix: sudo chmod 1777 {exchange}" in problem
    with pytest.raises(UnsafeExchange, match="not safe to share with students"):
        require_safe_exchange(str(exchange), COURSE)


def test_an_exchange_students_cannot_write_is_refused(exchange):
    os.chmod(exchange, 0o755)
    assert problems(exchange) == [f"{exchange}: mode 0755: students cannot hand in there\n"
                                  f"    fix: sudo chmod 1777 {exchange}"]


def test_a_missing_exchange_or_course_folder_names_the_set_up_line(tmp_path, exchange):
    """A missing exchange names the README's set-up line; a missing course folder is refused
    where a student could make it first, and left to the release, which makes it itself."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    [missing] = problems(tmp_path / "nowhere")
    assert missing.endswith("fix: " + SET_UP.format(root=tmp_path / "nowhere", owner=me, course=COURSE))
    for folder in ("outbound", "inbound", "feedback", ""):
        os.rmdir(exchange / COURSE / folder)
    [missing] = problems(exchange)
    assert "any student could make it first" in missing
    assert problems(exchange, course_must_exist=False) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="folders of other users need root")
def test_folders_of_other_users_are_refused(exchange):
    """A course folder a student made first, or an inbound folder of hers, or a parent folder
    she owns: is each refused, naming her and a fix that does not keep her files?"""
    student = pwd.getpwnam("daemon")
    os.chown(exchange / COURSE, student.pw_uid, -1)
    [problem] = problems(exchange)
    assert "owned by daemon, not by the instructor" in problem
    assert f"sudo rm -r {exchange / COURSE} && sudo install -d" in problem
    os.chown(exchange / COURSE, 0, -1)
    os.chown(exchange / COURSE / "inbound", student.pw_uid, -1)
    [problem] = problems(exchange)
    assert "inbound: is not a folder of the instructor's (owner daemon)" in problem
    os.chown(exchange / COURSE / "inbound", 0, -1)
    os.chown(exchange.parent, student.pw_uid, -1)
    try:
        [problem] = problems(exchange)
        assert f"{exchange.parent}: is owned by daemon, who could rename the exchange" in problem
    finally:
        os.chown(exchange.parent, 0, -1)


@pytest.mark.skipif(os.geteuid() != 0, reason="folders of other users need root")
def test_a_hub_instructor_owns_the_course_and_an_earlier_root_release_is_named(exchange):
    """On the hub the instructors are a group's members: a course folder left root's by an
    earlier release is named with the chown that hands it to them."""
    teacher = pwd.getpwnam("daemon")
    [problem] = problems(exchange, instructors={teacher.pw_uid})
    assert "is root's, not the instructor's" in problem and f"sudo chown -R daemon {exchange / COURSE}" in problem
    for folder in ("", "outbound", "inbound", "feedback"):
        os.chown(exchange / COURSE / folder, teacher.pw_uid, -1)
    assert problems(exchange, instructors={teacher.pw_uid}) == []


def test_an_inbound_folder_without_its_sticky_bit_or_a_writable_course_is_named(exchange):
    os.chmod(exchange / COURSE / "inbound", 0o2733)
    os.chmod(exchange / COURSE / "outbound", 0o777)
    found = problems(exchange)
    assert any("lets a student rename or remove another's hand-in" in p and "chmod +t" in p for p in found)
    assert any("outbound: mode 0777 lets other users write it" in p for p in found)
