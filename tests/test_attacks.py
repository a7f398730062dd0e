"""The attack corpus: every route a malicious submission took against the kit, tried again.

Each submission in `tests/submissions/attacks/` is ordinary Python a student could hand in.
Each test asserts that the attacker gets no more than it deserves, that an innocent
submission graded right after gets exactly its score, that nothing outside the sandbox
changed (kit files, the environment's packages, `$HOME`, the host's temporary folders), that
no process outlives grading, and that the time bound holds. Limits are scaled down so the
corpus runs in CI in a few minutes.
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import site
import socket
import subprocess
import tempfile
import time

import pytest

from graders import Limits, grade_submission
from graders.batch import discover, run_batch
from graders.sandbox import SLOT_UID_BASE, SLOTS, choose_isolation, slot_lock

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTACKS = os.path.join(REPO_ROOT, "tests", "submissions", "attacks")
SOLUTION = os.path.join(REPO_ROOT, "solutions", "problem1.py")
FAST = Limits(cell_timeout=5, case_timeout=5, stall_timeout=20, run_timeout=20, submission_timeout=240)
MARKERS = ("outlive-marker-7f3a", "resources-marker-9c1e")
WATCHED = ["/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~")]


def kit_state() -> dict[str, str]:
    """A fingerprint of everything a submission must not change: the kit's files, the
    environment's .pth files, and every file named pwned-* where an attack would write it."""
    state = {}
    for root, dirs, files in os.walk(REPO_ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".venv", ".git", "__pycache__", ".pytest"))
                   and d not in ("build", "dist", "graded")]
        for name in files:
            path = os.path.join(root, name)
            if "pwned" in name:
                state[path] = "PWNED"
            elif name.endswith((".py", ".toml", ".cfg", ".pth")):
                with open(path, "rb") as f:
                    state[path] = hashlib.sha256(f.read()).hexdigest()
    for folder in site.getsitepackages():
        for path in glob.glob(os.path.join(folder, "*.pth")):
            state[path] = "pth"
    for folder in WATCHED:
        for path in glob.glob(os.path.join(folder, "**", "pwned*"), recursive=True):
            state[path] = "PWNED"
    for path in glob.glob(os.path.expanduser("~/.ipython/profile_default/startup/*")) + \
            glob.glob(os.path.expanduser("~/.jupyter/*.py")):
        state[path] = "startup"
    return state


def slot_in_use(uid: int) -> bool:
    """Is a grading (maybe another one on this machine) holding this sandbox uid now?"""
    try:
        with open(slot_lock(uid - SLOT_UID_BASE)) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
    except FileNotFoundError:
        return False
    except OSError:
        return True


def leftover_processes() -> list[str]:
    """Processes carrying an attack's marker, or of a sandbox uid no grading holds, still alive."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        leaked = SLOT_UID_BASE <= uid < SLOT_UID_BASE + SLOTS and not slot_in_use(uid)
        if leaked or any(m in cmdline for m in MARKERS):
            found.append(f"{entry}: uid {uid}: {cmdline[:100]}")
    return found


@pytest.fixture(scope="module")
def sandbox():
    """The tests need the real sandbox: no skipping into a weaker one."""
    isolation = choose_isolation("auto")
    assert isolation.sandboxed
    return isolation


@pytest.fixture
def guarded(sandbox):
    """Grade an attack; then check nothing changed, nothing lives on, and an innocent
    submission graded next still gets its exact score."""
    before = kit_state()

    def grade(name: str, only: list[str], limits: Limits = FAST, **format_args):
        path = os.path.join(ATTACKS, name + ".py")
        if format_args:
            text = open(path).read()
            for key, value in format_args.items():
                text = text.replace("{" + key + "}", str(value))
            path = os.path.join(guarded_tmp, name + ".py")
            with open(path, "w") as f:
                f.write(text)
        started = time.monotonic()
        result = grade_submission(path, "problem1", limits=limits, only=only)
        result.elapsed = time.monotonic() - started
        return result

    guarded_tmp = tempfile.mkdtemp(prefix="attacks-")
    yield grade
    assert leftover_processes() == []
    innocent = grade_submission(SOLUTION, "problem1", limits=FAST, only=["shard_average_jit"])
    assert innocent.score == innocent.max_score, innocent.to_text()
    after = kit_state()
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert changed == [], changed


def test_escape_through_the_parent_finds_nothing(guarded):
    """Can a submission read the solutions, the hidden cases or the secret through /proc, write
    into the kit, the environment, $HOME or /tmp, undo its mounts, or reach the network?"""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.1)
    try:
        result = guarded("escape", ["shard_average_jit"], port=server.getsockname()[1])
        with pytest.raises(OSError):
            server.accept()  # nobody connected
    finally:
        server.close()
    assert result.score == 0, result.to_text()
    assert "not implemented" in result.part("shard_average_jit").output


def test_a_process_that_outlives_its_grading_is_killed(guarded):
    """Does a setsid, double-forked watcher die with its grading, before it can forge the
    next grading's events or copy its source?"""
    result = guarded("outlive", ["shard_average_jit"])
    assert result.score == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="slot uids are root's to hand out")
def test_the_sweep_waits_for_orphaned_zombies():
    """Does the sweep after a grading leave no process of its uid, not even the zombie of an
    orphan that the machine's init has yet to reap (it counts against the next grading's
    process limit)?"""
    from graders import sandbox

    with sandbox.Slot() as slot:
        subprocess.run(["setpriv", f"--reuid={slot.uid}", f"--regid={slot.uid}", "--clear-groups",
                        "sh", "-c", "sleep 0.3 & sleep 0.3 & exit 0"], check=True)
        assert sandbox._processes_of(slot.uid)  # the orphans, reparented to init
        sandbox.kill_user(slot.uid)
        assert sandbox._processes_of(slot.uid) == {}


def test_a_waiting_judge_cannot_be_given_a_forged_request(guarded):
    """The judges start while the export still runs and wait for their request on stdin. Can
    a submission that keeps its export busy see them, or write a forged judge request (all-zero
    inputs, where returning zeros is right) into their stdin?"""
    result = guarded("hijack_judge", ["shard_average_jit"])
    part = result.part("shard_average_jit")
    assert part.score == 0, part.output
    assert "hijack report: saw 0 other processes, wrote into the stdin of 0 (0 of them judges)" \
        in part.output, part.output


def test_killing_the_grader_costs_only_the_attacker(guarded):
    """Does os.kill(getppid(), SIGKILL) (and kill -1, and its own group) leave the grader
    standing, with a result for the attacker?"""
    result = guarded("kill_grader", ["shard_average_jit"])
    assert result.score == 0
    assert "could not be run" in result.part("shard_average_jit").output


def test_unbounded_resources_are_bounded(guarded):
    """Do 50 processes, 256 MB written everywhere and a 10 MB exception message stay inside
    the sandbox, with the right score and bounded feedback?"""
    result = guarded("resources", ["shard_average_jit", "roll_diff"])
    assert result.part("shard_average_jit").passed, result.part("shard_average_jit").output
    assert result.part("roll_diff").score == 0
    assert len(result.part("roll_diff").output) <= 4000
    assert len(str(result.to_gradescope())) < 20_000


def test_a_time_bomb_costs_two_case_timeouts(guarded):
    """Does a submission that loads for just under the cell limit and then defeats the per-case
    alarm cost at most two case timeouts (plus restarts), with a message saying why?"""
    limits = Limits(cell_timeout=2, case_timeout=2, stall_timeout=10, run_timeout=20,
                    submission_timeout=120)
    result = guarded("time_bomb", ["roll_diff"], limits)
    part = result.part("roll_diff")
    assert part.score == 0
    assert "not run: 2 earlier cases of roll_diff already failed" in part.output, part.output
    assert result.elapsed < 60, result.elapsed


def test_the_shard_map_rule_reads_operations_not_names(guarded):
    """Does plain jax.jit inside named_scope("manual_computation") fail the shard_map rule,
    keeping only the values half of the points?"""
    result = guarded("scope_trick", ["shard_average_shard_map"])
    part = result.part("shard_average_shard_map")
    assert all(c.values_ok and not c.rule_ok for c in part.cases if c.case.mesh != (1, 1)), part.output
    assert "must be written with jax.shard_map" in part.output
    assert part.score < part.max_score


def test_an_artifact_with_a_foreign_custom_call_is_not_run(guarded):
    """Does an artifact exported with jax.export's custom-call check patched away, calling the
    CPU host-callback target inside the judge, get refused before it is compiled?"""
    result = guarded("foreign_call", ["shard_average_jit"])
    part = result.part("shard_average_jit")
    assert part.score == 0
    assert "the exported program calls xla_ffi_python_cpu_callback, which the graders do not run" \
        in part.output, part.output


def test_a_forged_eager_report_gains_nothing(sandbox):
    """Does place() that returns its input unplaced, while forging a passing report and
    malformed events on the channel, get nothing, with the grader standing?"""
    result = grade_submission(os.path.join(ATTACKS, "forge_place.py"), "warmup", limits=FAST,
                              only=["place"])
    part = result.part("place")
    assert part.score == 0, part.output
    assert leftover_processes() == []


def test_a_batch_of_five_cannot_be_broken_by_one_student(sandbox, tmp_path):
    """Three copies of the solution, one submission that kills its grader and one that copies
    a classmate, graded two at a time: three full marks, and nothing for the other two."""
    folder = tmp_path / "submitted"
    folder.mkdir()
    for student in ("alice", "bob", "carol"):
        (folder / f"{student}.py").write_text(open(SOLUTION).read())
    (folder / "mallory.py").write_text(open(os.path.join(ATTACKS, "kill_grader.py")).read())
    (folder / "trudy.py").write_text(open(os.path.join(ATTACKS, "copy_classmate.py")).read())
    out = tmp_path / "graded"
    outcomes = run_batch(discover(str(folder), "problem1"), "problem1", str(out), workers=2,
                         limits=FAST, only=["shard_average_jit"])
    scores = {o.submission.student: (o.results["score"], o.status) for o in outcomes}
    full = outcomes[0].results["tests"][0]["max_score"]
    assert scores == {"alice": (full, "graded"), "bob": (full, "graded"), "carol": (full, "graded"),
                      "mallory": (0, "graded"), "trudy": (0, "graded")}
    assert all(o.results["extra_data"]["isolation"].startswith("bubblewrap") for o in outcomes)
    assert leftover_processes() == []


def test_hidden_inputs_depend_on_the_course_secret():
    """Do two secrets give different hidden inputs, and one secret the same ones every time?"""
    import numpy as np

    from assignments.contracts import get_assignment
    from graders.hidden import case_seed, hidden_cases, hidden_inputs

    spec = get_assignment("problem1")
    part = spec.part("roll_diff")
    case = hidden_cases(spec)[part.name][0]
    a1, = hidden_inputs(spec, part, case, case_seed("problem1", part.name, 0, b"course A"))
    a2, = hidden_inputs(spec, part, case, case_seed("problem1", part.name, 0, b"course A"))
    b, = hidden_inputs(spec, part, case, case_seed("problem1", part.name, 0, b"course B"))
    assert np.array_equal(a1, a2) and not np.array_equal(a1, b)


FALLBACK_PROBE = r"""
import json, os, socket, sys
json.loads(sys.stdin.read())
found = [f"uid={os.getuid()}"]
for path in ("graders/harness.py", "solutions/problem1.py", ".grading-secret"):
    try:
        open(os.path.join(KIT, path)).read()
        found.append("read " + path)
    except OSError:
        pass
for path in (os.path.join(KIT, "pwned-fallback"), "/root/pwned-fallback"):
    try:
        open(path, "w").write("pwned")
        found.append("wrote " + path)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=1)
    found.append("network")
except OSError:
    pass
print(json.dumps({"event": "start", "id": "f__0"}), flush=True)
print(json.dumps({"event": "case", "id": "f__0", "status": "error", "message": " ".join(found)}), flush=True)
print(json.dumps({"event": "finished", "timings": {}}), flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the dedicated-uid fallback needs root")
def test_the_dedicated_uid_fallback_walls_off_the_kit(tmp_path):
    """Where bubblewrap cannot run, does a worker under the fallback (a uid of its own, the
    kit's hidden folders made private) run unprivileged, unable to read the hidden material,
    write the kit or reach the network? (The probe is the system Python: this machine's JAX
    environment lives under a private $HOME, which the fallback rightly refuses.)"""
    import json as _json

    from graders import sandbox

    if sandbox.uid_fallback_problem() is None:
        pytest.skip("this machine's environment is readable by others: covered by grading runs")
    with pytest.raises(sandbox.SandboxUnavailable, match="not readable by other users"):
        sandbox.choose_isolation("uid")  # refused, with the fix named
    modes = {n: os.stat(os.path.join(REPO_ROOT, n)).st_mode for n in sandbox.HIDDEN
             if os.path.lexists(os.path.join(REPO_ROOT, n))}
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        sandbox.protect_hidden()
        isolation = sandbox.Isolation("uid", "test")
        script = FALLBACK_PROBE.replace("KIT", repr(REPO_ROOT)).replace("PORT", str(server.getsockname()[1]))
        with sandbox.Slot() as slot:
            run = sandbox.run_worker(
                ["/usr/bin/python3", "-I", "-c", script], lambda skip: _json.dumps({}), ["f__0"],
                kind="export", deadlines=sandbox.Deadlines(10, 10, time.monotonic() + 30),
                resources=sandbox.Resources(), isolation=isolation, uid=slot.uid,
                function_of={"f__0": "f"}, cwd=str(tmp_path))
        found = run.results["f__0"]["message"]
    finally:
        server.close()
        for name, mode in modes.items():
            os.chmod(os.path.join(REPO_ROOT, name), mode)
    uid = int(found.split()[0].removeprefix("uid="))
    assert SLOT_UID_BASE <= uid < SLOT_UID_BASE + SLOTS, found
    assert found.split() == [found.split()[0]], f"the fallback let the worker do: {found}"
