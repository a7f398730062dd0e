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
import json
import glob
import hashlib
import os
import shutil
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
containment = pytest.mark.containment
"""The attacks whose subject is the operating system's containment (processes, memory, files,
uids, the supervisor's timeouts), which no Python or JAX version changes: `.ci/run` runs them
on one stack."""
protocol = pytest.mark.stack_neutral
"""The attacks on the grading protocol, the verdict cache and the course secret (forged
requests and events, planted verdicts, cache keys): the supervisor's and the harness's own
Python, which no JAX version changes; `.ci/run` runs them on one stack. Attacks that go
through a compiled program (names, custom calls, hidden values in outputs) run on both."""


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
    for folder in WATCHED:  # as glob's "**/pwned*" would (hidden folders left out), in half the time
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in dirs + files:
                if name.startswith("pwned"):
                    state[os.path.join(root, name)] = "PWNED"
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


def _alive(pid: str) -> tuple[int, str] | None:
    """(uid, command line) of a process that still runs (not a zombie), or None."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return uid, f.read().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return None


def leftover_processes() -> list[str]:
    """Processes carrying an attack's marker, or of a sandbox uid no grading holds, still alive.
    A process is blamed only if it still runs after its uid's slot was seen free: another
    xdist worker's grading may end (kill its uid's processes, free the slot) in between."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (seen := _alive(entry)) is None:
            continue
        uid, cmdline = seen
        # (the last uid is bubblewrap's start-up probe, which any grading process may be running)
        leaked = SLOT_UID_BASE <= uid < SLOT_UID_BASE + SLOTS - 1 and not slot_in_use(uid)
        if (leaked or any(m in cmdline for m in MARKERS)) and _alive(entry) == seen:
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
    shutil.rmtree(guarded_tmp, ignore_errors=True)
    after = kit_state()
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert changed == [], changed


@containment
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


@containment
def test_a_process_that_outlives_its_grading_is_killed(guarded):
    """Does a setsid, double-forked watcher die with its grading, before it can forge the
    next grading's events or copy its source?"""
    result = guarded("outlive", ["shard_average_jit"])
    assert result.score == 0


@containment
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


@protocol
def test_a_waiting_judge_cannot_be_given_a_forged_request(guarded):
    """The judges start while the export still runs and wait for their request on stdin. Can
    a submission that keeps its export busy see them, or write a forged judge request (all-zero
    inputs, where returning zeros is right) into their stdin?"""
    result = guarded("hijack_judge", ["shard_average_jit"])
    part = result.part("shard_average_jit")
    assert part.score == 0, part.output
    assert "hijack report: saw 0 other processes, wrote into the stdin of 0 (0 of them judges)" \
        in part.output, part.output


@containment
def test_killing_the_grader_costs_only_the_attacker(guarded):
    """Does os.kill(getppid(), SIGKILL) (and kill -1, and its own group) leave the grader
    standing, with a result for the attacker?"""
    result = guarded("kill_grader", ["shard_average_jit"])
    assert result.score == 0
    assert "could not be run" in result.part("shard_average_jit").output


@containment
def test_unbounded_resources_are_bounded(guarded):
    """Do 50 processes, 256 MB written everywhere and a 10 MB exception message stay inside
    the sandbox, with the right score and bounded feedback?"""
    # Its top level starts 50 Pythons and writes up to 1 GB: on 2 busy cores (two CI runs side
    # by side) that took over FAST's 5 s. The subject here is what it leaves, not the time.
    loading = Limits(cell_timeout=20, case_timeout=5, stall_timeout=20, run_timeout=20, submission_timeout=240)
    result = guarded("resources", ["shard_average_jit", "roll_diff"], loading)
    assert result.part("shard_average_jit").passed, result.part("shard_average_jit").output
    assert result.part("roll_diff").score == 0
    assert len(result.part("roll_diff").output) <= 4000
    assert len(str(result.to_gradescope())) < 20_000


@containment
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


@protocol
def test_a_case_forged_in_the_wrong_form_costs_the_submission_not_the_grader(sandbox):
    """Does an export event that answers a jit case with an eager report (written on the
    graders' channel by the submission) fail the submission with the protocol's reason, where
    it once crashed the grader (a KeyError that blamed the kit and bought a regrade)?"""
    result = grade_submission(os.path.join(ATTACKS, "forge_form.py"), "problem1", limits=FAST,
                              only=["shard_average_jit"])
    part = result.part("shard_average_jit")
    assert part.score == 0 and result.failure is None, result.to_text()
    assert "a report for a case answered by an exported artifact" in part.output, part.output
    assert leftover_processes() == []


@containment
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
    scores = {o.submission.student: (o.result.score, o.status) for o in outcomes}
    full = outcomes[0].result.max_score
    assert scores == {"alice": (full, "graded"), "bob": (full, "graded"), "carol": (full, "graded"),
                      "mallory": (0, "graded"), "trudy": (0, "graded")}
    assert all(o.result.isolation.startswith("bubblewrap") for o in outcomes)
    assert leftover_processes() == []


@protocol
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
json.loads(sys.stdin.readline())
found = [f"uid={os.getuid()}"]
sys.path.insert(0, KIT)
try:
    import graders.sandboxed.protocol  # what the workers run: it must import
except Exception as e:
    found.append("cannot-import-graders.sandboxed")
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


@containment
@pytest.mark.skipif(os.geteuid() != 0, reason="the dedicated-uid fallback needs root")
def test_the_dedicated_uid_fallback_walls_off_the_kit(tmp_path):
    """Where bubblewrap cannot run, does a worker under the fallback (a uid of its own, the
    kit's hidden folders made private) run unprivileged, unable to read the hidden material,
    write the kit or reach the network? (The probe is the system Python: this machine's JAX
    environment lives under a private $HOME, which the fallback rightly refuses.)"""
    import json as _json

    from graders import sandbox, supervisor

    if sandbox.uid_fallback_problem() is None:
        pytest.skip("this machine's environment is readable by others: covered by grading runs")
    with pytest.raises(sandbox.SandboxUnavailable, match="not readable by other users"):
        sandbox.choose_isolation("uid")  # refused, with the fix named
    protected = [*os.listdir(REPO_ROOT), *(os.path.join("graders", n) for n in os.listdir(
        os.path.join(REPO_ROOT, "graders")))]
    modes = {n: os.stat(os.path.join(REPO_ROOT, n)).st_mode for n in protected
             if os.path.lexists(os.path.join(REPO_ROOT, n)) and not os.path.islink(os.path.join(REPO_ROOT, n))}
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        sandbox.protect_hidden()
        isolation = sandbox.Isolation("uid", "test")
        script = FALLBACK_PROBE.replace("KIT", repr(REPO_ROOT)).replace("PORT", str(server.getsockname()[1]))
        with sandbox.Slot() as slot:
            setup = supervisor.WorkerSetup(sandbox.Resources.of(FAST), isolation, slot.uid, str(tmp_path),
                                           {"f__0": "f"}, 2)
            run = supervisor.run_worker(
                ["/usr/bin/python3", "-I", "-c", script], lambda skip: _json.dumps({}) + "\n", ["f__0"],
                kind="export", deadlines=supervisor.Deadlines(10, 10, time.monotonic() + 30), setup=setup)
        found = run.results["f__0"].message
    finally:
        server.close()
        for name, mode in modes.items():
            os.chmod(os.path.join(REPO_ROOT, name), mode)
    uid = int(found.split()[0].removeprefix("uid="))
    assert SLOT_UID_BASE <= uid < SLOT_UID_BASE + SLOTS, found
    assert found.split() == [found.split()[0]], f"the fallback let the worker do: {found}"


# --- memory no process owns (tmpfs, memfd, System V), round two ------------------------------

MEMORY = Limits(cell_timeout=10, case_timeout=30, stall_timeout=60, run_timeout=20,
                submission_timeout=240, memory_gib=1.0, tmp_mib=64)
"""Scaled down: 1 GiB per worker, 64 MiB tmpfs and System V shared memory."""


def shmem_mib() -> float:
    """The host's shared memory (tmpfs and shared segments) now, in MiB."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Shmem:")) / 1024


def held(output: str, kind: str) -> int:
    import re

    found = re.search(rf"{kind}=(\d+)MiB", output)
    assert found, output
    return int(found.group(1))


needs_cgroup = pytest.mark.skipif(os.geteuid() != 0, reason="memory cgroups are made as root here")


@containment
@needs_cgroup
def test_memory_no_process_owns_is_bounded_by_the_grading(quiet_shared_memory, guarded):
    """Do /dev/shm, System V segments and memfds stay within the worker's memory limit (1 GiB
    here): /dev/shm and System V at their own 64 MiB, memfds until the worker's cgroup stops it,
    blamed on the submission with a message, with the host's shared memory back as before?"""
    from graders import cgroups

    assert cgroups.problem() is None, cgroups.problem()
    before = shmem_mib()
    result = guarded("hold_memory", ["shard_average_jit", "roll_diff"], MEMORY, cap_mib=3072)
    report = result.part("shard_average_jit").output
    assert held(report, "dev_shm") <= 64 and held(report, "sysv") <= 64, report
    roll = result.part("roll_diff")
    assert roll.score == 0
    assert "used more than its memory limit of 1 GiB" in roll.output, roll.output
    assert "memory: a cgroup per worker" in result.isolation
    assert shmem_mib() - before < 64, "shared memory outlived the grading"


@containment
@needs_cgroup
def test_a_memory_hog_costs_its_neighbour_nothing(sandbox, tmp_path):
    """Graded at the same time as the solution (a batch of two at once), does the memfd hog
    fail alone while its neighbour gets full marks?"""
    folder = tmp_path / "submitted"
    folder.mkdir()
    (folder / "alice.py").write_text(open(SOLUTION).read())
    (folder / "mallory.py").write_text(open(os.path.join(ATTACKS, "hold_memory.py")).read()
                                       .replace("{cap_mib}", "3072"))
    outcomes = run_batch(discover(str(folder), "problem1"), "problem1", str(tmp_path / "graded"),
                         workers=2, limits=MEMORY, only=["shard_average_jit", "roll_diff"])
    by_student = {o.submission.student: o.result for o in outcomes}
    assert by_student["alice"].score == by_student["alice"].max_score, by_student["alice"].to_text()
    assert by_student["mallory"].score == 0
    assert "more than its memory limit" in by_student["mallory"].part("roll_diff").output
    assert leftover_processes() == []


@containment
def test_without_a_cgroup_tmpfs_and_system_v_stay_bounded(guarded, monkeypatch):
    """Where no cgroup can be made, do /dev/shm (a sized tmpfs) and System V segments (the
    sandbox's IPC limits) still stop at 64 MiB, and does results.json say memory was bounded
    without a cgroup? (memfds are bounded only per file there: the hog stops itself at 256 MiB.)"""
    from graders import cgroups

    monkeypatch.setattr(cgroups, "problem", lambda: "disabled for this test")
    result = guarded("hold_memory", ["shard_average_jit"], MEMORY, cap_mib=256)
    report = result.part("shard_average_jit").output
    assert held(report, "dev_shm") <= 64 and held(report, "sysv") <= 64, report
    assert "memory: no cgroup (disabled for this test)" in result.isolation


# --- hidden values through feedback --------------------------------------------------------------


def _numbers(text: str) -> list[float]:
    import re

    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", text)]


def test_no_hidden_value_reaches_any_output_over_regradings(sandbox):
    """Graded twice, do the outputs of functions that return wrong values on purpose (a
    constant, the input itself) or raise with what they were given quote any hidden input or
    reference value? They may say where and how much (index, count, order of the error)."""
    import numpy as np

    from assignments.contracts import get_assignment
    from graders.hidden import case_seed, hidden_cases, hidden_inputs

    only = ["shard_average_jit", "block_average_jit", "roll_diff"]
    texts = [json.dumps(grade_submission(os.path.join(ATTACKS, "leak_values.py"), "problem1",
                                         limits=FAST, only=only).to_gradescope()) for _ in range(2)]
    assert texts[0] == texts[1]
    assert "values wrong" in texts[0]
    import re

    assert not re.search(r"(got|expected) -?\d", texts[0]), "a value is quoted"
    spec = get_assignment("problem1")
    secret_values = []
    for name in only:
        part = spec.part(name)
        for i, case in enumerate(hidden_cases(spec)[name]):
            arrays = hidden_inputs(spec, part, case, case_seed("problem1", name, i))
            reference = part.reference(*[a.astype(np.float64) for a in arrays], mesh=case.mesh, **case.statics)
            secret_values += [*arrays[0].ravel().tolist(), *np.ravel(reference).tolist()]
    secret = {round(v, 3) for v in secret_values if abs(v) > 0.01}
    quoted = [x for x in _numbers(texts[0]) if round(x, 3) in secret]
    assert quoted == [], f"hidden values in the output: {quoted[:5]}"


def test_no_message_counts_what_a_program_chose_to_get_wrong(sandbox):
    """A program that gets wrong as many elements as a digit of a hidden value: does any
    hidden-case message carry a number a program chose (a count, an index, an error's size)?"""
    import re

    result = grade_submission(os.path.join(ATTACKS, "leak_by_count.py"), "problem1", limits=FAST,
                              only=["shard_average_jit"])
    from assignments.contracts import get_assignment
    from assignments.evaluate import check_call

    part, spec = result.part("shard_average_jit"), get_assignment("problem1").part("shard_average_jit")
    # The call each message names holds the case's own label (mesh and sizes), no number the
    # program chose: left out before looking for numbers.
    messages = [p.replace(check_call(spec, c.case), "check(...)") for c in part.cases for p in c.messages
                if p.startswith("values wrong")]
    assert len(messages) == len(part.cases), part.output
    assert all(not re.search(r"\d", m) for m in messages), messages
    assert len(set(messages)) <= 2, set(messages)


# --- the verdict cache ----------------------------------------------------------------------------


def test_only_verdicts_of_programs_that_ran_are_cached(sandbox, tmp_path, monkeypatch):
    """Is a case whose program fails when run (out of memory: something an earlier program in
    the same judge could cause) never cached, while the solution's cases all are?"""
    monkeypatch.setenv("KIT_VERDICT_CACHE", str(tmp_path / "cache"))

    def stored() -> int:
        return sum(len(files) for _, _, files in os.walk(tmp_path / "cache"))

    result = grade_submission(os.path.join(ATTACKS, "exhaust_at_run_time.py"), "problem1", limits=FAST,
                              only=["shard_average_jit"])
    assert all(not c.ran and "RESOURCE_EXHAUSTED" in " ".join(c.messages)
               for c in result.part("shard_average_jit").cases), result.to_text()
    assert stored() == 0
    solution = grade_submission(SOLUTION, "problem1", limits=FAST, only=["shard_average_jit"])
    assert all(c.ran for c in solution.part("shard_average_jit").cases)
    assert stored() == len(solution.part("shard_average_jit").cases)


@protocol
def test_a_submission_cannot_read_or_plant_verdicts(guarded, tmp_path, monkeypatch):
    """The parent serves cached verdicts without compiling: can a submission read them, or
    plant a verdict that would give someone full marks? The attack looks for the cache beside
    the kit, at $KIT_VERDICT_CACHE and in every folder it sees, and forges "passed" verdicts."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KIT_VERDICT_CACHE", str(cache))
    grade_submission(SOLUTION, "problem1", limits=FAST, only=["shard_average_jit"])

    def contents() -> dict[str, bytes]:
        return {str(p.relative_to(cache)): p.read_bytes() for p in cache.rglob("*") if p.is_file()}

    stored = contents()
    assert stored, "the solution's verdicts were not stored"
    attack = guarded("poison_cache", only=["shard_average_jit"])
    assert attack.score == 0, attack.to_text()
    assert contents() == stored  # nothing changed, nothing planted


@protocol
def test_the_cache_key_covers_everything_a_verdict_depends_on(monkeypatch, tmp_path):
    """Does the key change with the artifact, the case, the seed, and with the judging code, the
    JAX and jaxlib versions and the judges' XLA flags?"""
    from graders import verdicts

    base = verdicts.key("problem1", "roll_diff", {"mesh": [2, 4]}, 7, b"artifact")
    assert base == verdicts.key("problem1", "roll_diff", {"mesh": [2, 4]}, 7, b"artifact")
    others = [verdicts.key("problem1", "roll_diff", {"mesh": [4, 2]}, 7, b"artifact"),
              verdicts.key("problem1", "roll_diff", {"mesh": [2, 4]}, 8, b"artifact"),
              verdicts.key("problem1", "roll_diff", {"mesh": [2, 4]}, 7, b"artifact!")]
    for change in ({"XLA_FLAGS": "--xla_other"}, {"_version": lambda p: f"{p}==0.0.0"}):
        verdicts.judging_digest.cache_clear()
        for name, value in change.items():
            monkeypatch.setattr(verdicts, name, value)
        others.append(verdicts.key("problem1", "roll_diff", {"mesh": [2, 4]}, 7, b"artifact"))
        monkeypatch.undo()
    verdicts.judging_digest.cache_clear()
    assert len({base, *others}) == 1 + len(others)
    monkeypatch.setenv(verdicts.VARIABLE, str(tmp_path))
    assert not verdicts.holds_any("problem1")  # so a grading starts its judges with the export
    verdicts.store("problem1", base, {"values_ok": True, "rule_ok": True, "problems": [], "ran": False})
    assert verdicts.load("problem1", base) is None and not verdicts.holds_any("problem1")  # a failure to run is never stored
    verdicts.store("problem1", base, {"values_ok": True, "rule_ok": True, "problems": [], "ran": True})
    assert verdicts.load("problem1", base)["ran"] and verdicts.holds_any("problem1")
    assert verdicts.load("problem2", base) is None and not verdicts.holds_any("problem2")
