"""The sandbox every piece of student code runs in, and the supervisor that survives it.

Both grading workers (the export worker, which runs student code, and the judge, which runs
programs compiled from it) run under bubblewrap (`bwrap`, the sandbox behind Flatpak):
- an unprivileged user with no capabilities and `no_new_privs`: as root, the worker runs as
  a uid of its own (one per concurrent grading, `Slot`) inside a user namespace; as another
  user, as that user inside a user namespace;
- its own PID, network, mount, IPC, UTS and user namespaces, with no further user namespaces;
- a read-only view of only the interpreter, the environment's packages and the `assignments`
  runtime; `graders/`, `solutions/`, the course folders, `$HOME`, the host's `/tmp` and
  other gradings do not exist there;
- its own empty `/tmp` and `/scratch`, each a tmpfs with a size cap;
- rlimits on address space, processes, open files, file size and CPU time;
- everything it started dies with it: the sandbox is a PID namespace whose init is killed
  when grading ends, and which dies with the grading process (`--die-with-parent`).
Requests go in on stdin and events come back on stdout (`assignments.protocol`); nothing on
the host is shared with the worker, so no other process can reach a grading's channel.

Where bubblewrap cannot run, grading refuses untrusted work unless asked explicitly for no
isolation (`Limits.sandbox = "none"`), and `results.json` records which isolation was used.
"""
from __future__ import annotations

import fcntl
import functools
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from assignments.protocol import MAX_LINE_BYTES, ProtocolError, read_event

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOT_UID_BASE = 200_000
"""As root, concurrent grading number n runs its workers as uid SLOT_UID_BASE + n."""
SLOTS = 256
DEBUG_VARIABLE = "KIT_SANDBOX_DEBUG"
"""Set it (to anything) to see the workers' stderr, e.g. when the sandbox fails to start."""
SANDBOX_UID = 1000
"""The worker's uid as it sees it, inside its user namespace."""


class SandboxUnavailable(RuntimeError):
    """Bubblewrap cannot run here, and no isolation was not asked for explicitly."""


@dataclass(frozen=True)
class Resources:
    """What one sandboxed worker may use."""

    memory_bytes: int = 8 * 2**30
    """Address space of each process."""
    tmp_bytes: int = 512 * 2**20
    """Size of each of /tmp and /scratch (tmpfs) inside the sandbox."""
    processes: int = 512
    """Processes and threads of the sandbox's user (XLA starts dozens of threads)."""
    open_files: int = 1024
    cpu_seconds: int = 1800
    """CPU time of each process (all its threads)."""


# --- what the machine allows ----------------------------------------------------------------


def _merged_usr_links() -> list[str]:
    """bwrap arguments that recreate /bin, /lib, ... as on the host (links into /usr, or
    read-only folders on systems that never merged /usr)."""
    args = []
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + top
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


@functools.lru_cache(maxsize=1)
def readable_roots() -> tuple[str, ...]:
    """Folders a worker may read: the interpreter, the environment's packages, the runtime."""
    import sysconfig

    import assignments

    roots = ["/usr", sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"], os.path.dirname(os.path.abspath(assignments.__file__))]
    real: list[str] = []
    for root in sorted({os.path.realpath(r) for r in roots if os.path.isdir(r)}, key=len):
        if root != "/" and not any(root == r or root.startswith(r + "/") for r in real):
            real.append(root)
    return tuple(real)


HOSTNAME = "sandbox"


@functools.lru_cache(maxsize=1)
def _etc_files() -> list[str]:
    """bwrap arguments for the sandbox's /etc/hosts and /etc/nsswitch.conf: its own name on
    its own loopback, looked up in files only (gloo, used by the multi-controller runs,
    resolves the host name; there is no DNS in the sandbox)."""
    folder = os.path.join(tempfile.gettempdir(), f"scaling-jax-kit-{os.geteuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    args = ["--perms", "0755", "--dir", "/etc"]
    for name, text in (("hosts", f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n"),
                       ("nsswitch.conf", "hosts: files\n")):
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        args += ["--ro-bind", path, f"/etc/{name}"]
    return args


def _view() -> list[str]:
    """bwrap arguments that build the worker's read-only view of the filesystem."""
    args = list(_etc_files())
    for root in readable_roots():
        parts = root.strip("/").split("/")
        for i in range(1, len(parts)):  # intermediate folders traversable by the worker
            args += ["--perms", "0755", "--dir", "/" + "/".join(parts[:i])]
        args += ["--ro-bind", root, root]
    return args + _merged_usr_links()


XLA_FLAGS = "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
"""The workers' XLA flags. LLVM's optimization level 0 compiles a third faster and leaves the
partitioned HLO the rules read unchanged (`benchmarks/xla_compile_flags.py` measures both);
the hidden inputs are small, so slower generated code costs nothing."""


def _environment() -> list[str]:
    env = {"HOME": "/scratch", "TMPDIR": "/tmp", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "JAX_PLATFORMS": "cpu", "XLA_FLAGS": XLA_FLAGS, "PYTHONDONTWRITEBYTECODE": "1"}
    args = ["--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def bwrap_command(command: list[str], uid: int | None, resources: Resources,
                  shared: tuple[str, str] | None = None) -> list[str]:
    """`command` wrapped in bubblewrap. As root (`uid` given), an outer bwrap builds the
    namespaces and the view, drops to `uid` with setpriv, and an inner unprivileged bwrap
    adds the user namespace; otherwise one unprivileged bwrap does it all. `shared` =
    (host folder, path inside) is the one writable host folder, when a run needs one."""
    under_tmp = [arg for root in readable_roots() if root.startswith("/tmp/")
                 for arg in ("--ro-bind", root, root)]  # back on top of the private /tmp
    outer_share = ["--bind", shared[0], shared[1]] if shared else []
    inner_share = ["--bind", shared[1], shared[1]] if shared else []
    private = ["--size", str(resources.tmp_bytes), "--tmpfs", "/tmp",
               "--size", str(resources.tmp_bytes), "--tmpfs", "/scratch", "--chdir", "/scratch"]
    user = ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--die-with-parent", "--new-session"]
    if uid is None:
        return ["bwrap", "--unshare-all", "--hostname", HOSTNAME, *user, *_view(), "--proc", "/proc", "--dev", "/dev",
                *private, *under_tmp, *outer_share, *_environment(), "--", *command]
    outer = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--hostname", HOSTNAME,
             "--unshare-cgroup-try", "--die-with-parent", "--new-session",
             "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
             *_view(), "--proc", "/proc", "--dev", "/dev",
             "--perms", "0755", "--dir", "/tmp", "--perms", "0755", "--dir", "/scratch", *outer_share, "--"]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]
    inner = ["bwrap", *user, "--ro-bind", "/", "/", "--dev", "/dev", *private, *under_tmp, *inner_share,
             *_environment(), "--"]
    return [*outer, *drop, *inner, *command]


@functools.lru_cache(maxsize=1)
def bubblewrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox a worker on this machine, or None when it can."""
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        return "setpriv (util-linux) is missing"
    probe = bwrap_command([sys.executable, "-I", "-c", "import os; print(os.getuid())"],
                          SLOT_UID_BASE + SLOTS - 1 if os.geteuid() == 0 else None, Resources())
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap failed to start ({e})"
    if proc.returncode != 0 or proc.stdout.strip() != str(SANDBOX_UID):
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return (f"bubblewrap could not create its namespaces here ({why}); user namespaces may "
                f"be disabled (sysctl kernel.unprivileged_userns_clone=1) or blocked by the container")
    return None


@dataclass(frozen=True)
class Isolation:
    """Which isolation a grading ran under (recorded in results.json)."""

    level: str
    """"bubblewrap", "uid" (the fallback: a dedicated uid without namespaces) or "none"."""
    note: str

    @property
    def sandboxed(self) -> bool:
        return self.level == "bubblewrap"


HIDDEN = ("graders", "solutions", "source", "tests", ".git", "submitted", "autograded", "feedback",
          "release", ".grading-secret", ".verdict-cache")
"""The kit's material a sandboxed uid must not read (the fallback makes it private)."""


def _readable_by_others(path: str) -> bool:
    """Can a uid that is not the owner (nor in the group) read `path` and reach it?"""
    path = os.path.realpath(path)
    parts = path.split("/")
    for i in range(2, len(parts) + 1):
        mode = os.stat("/".join(parts[:i]) or "/").st_mode
        if not mode & 0o001:  # a folder on the way others cannot traverse
            return False
    return bool(os.stat(path).st_mode & 0o004)


def uid_fallback_problem() -> str | None:
    """Why a dedicated uid cannot run the workers here, or None when it can."""
    if os.geteuid() != 0:
        return "a dedicated uid needs the graders to run as root"
    if not (shutil.which("setpriv") and shutil.which("prlimit")):
        return "setpriv and prlimit (util-linux) are missing"
    private = [r for r in readable_roots() if not _readable_by_others(r)]
    if private:
        return (f"the interpreter or runtime is not readable by other users ({private[0]}); install "
                f"the kit's environment where other users can read it (e.g. under /opt)")
    return None


def protect_hidden() -> None:
    """Make the kit's hidden material readable by its owner only (the fallback's wall)."""
    for name in HIDDEN:
        path = os.path.join(REPO_ROOT, name)
        if os.path.lexists(path):
            os.chmod(path, os.stat(path).st_mode & 0o700)


def choose_isolation(sandbox: str) -> Isolation:
    """The isolation for `sandbox`: "auto" (bubblewrap, else as root a dedicated uid, else
    refuse), "bubblewrap", "uid" or "none" (the explicit opt-out)."""
    if sandbox == "none":
        return Isolation("none", "NO ISOLATION: student code ran as the grader's own user, with "
                                 "access to the grader's files and network (--unsandboxed)")
    problem = bubblewrap_problem() if sandbox in ("auto", "bubblewrap") else "not asked for"
    if problem is None:
        who = "a uid of its own" if os.geteuid() == 0 else "the grader's uid"
        return Isolation("bubblewrap", f"bubblewrap: {who} in a user namespace, no capabilities, own "
                                       f"PID/network/mount/IPC namespaces, read-only runtime, private /tmp")
    fallback = uid_fallback_problem() if sandbox in ("auto", "uid") else "not asked for"
    if fallback is None:
        protect_hidden()
        return Isolation("uid", f"dedicated uid (bubblewrap unavailable: {problem}): a uid of its own, "
                                f"no capabilities, rlimits, kit's hidden folders private, "
                                f"{'no network' if _can_unshare_net() else 'NETWORK REACHABLE'}; "
                                f"the rest of the filesystem is visible read-only by permissions")
    raise SandboxUnavailable(
        f"cannot grade untrusted code in a sandbox here: {problem}; no dedicated-uid fallback "
        f"either: {fallback}. Fix one of these, or pass --unsandboxed (Limits(sandbox='none')) to "
        f"grade trusted code without isolation.")


@functools.lru_cache(maxsize=1)
def _can_unshare_net() -> bool:
    return bool(shutil.which("unshare")) and subprocess.run(
        ["unshare", "-n", "true"], capture_output=True).returncode == 0


def uid_command(command: list[str], uid: int, home: str) -> list[str]:
    """`command` as `uid` with no capabilities (the fallback), without network where possible."""
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--", "env", f"HOME={home}", f"TMPDIR={home}"]
    return (["unshare", "-n", "--"] if _can_unshare_net() else []) + drop + command


# --- one uid per concurrent grading ---------------------------------------------------------


def slot_lock(n: int) -> str:
    """The lock file a grading holds while it uses uid SLOT_UID_BASE + n."""
    return os.path.join(tempfile.gettempdir(), "scaling-jax-kit-slots", f"slot-{n}.lock")


class Slot:
    """A uid reserved for one grading's workers while it runs (root only), so that
    concurrent gradings share no process limit, and every process that uid still has at the
    end can be found and killed. Without root, the grader's own uid (`uid` is None)."""

    def __init__(self):
        self.uid: int | None = None
        self._lock = None

    def __enter__(self) -> "Slot":
        if os.geteuid() != 0:
            return self
        os.makedirs(os.path.dirname(slot_lock(0)), mode=0o700, exist_ok=True)
        for n in range(SLOTS - 1):  # the last one is the probe's
            handle = open(slot_lock(n), "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            self._lock, self.uid = handle, SLOT_UID_BASE + n
            kill_user(self.uid)  # leftovers of a grading that was itself killed
            return self
        raise RuntimeError(f"more than {SLOTS - 1} gradings at once on this machine")

    def __exit__(self, *exc) -> None:
        if self.uid is not None:
            kill_user(self.uid)
            self._lock.close()


def _processes_of(uid: int) -> dict[int, bool]:
    """The processes of `uid`, each with whether it is still alive (not a zombie)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat") as f:
                found[int(entry)] = f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            continue
    return found


def kill_user(uid: int, wait: float = 5.0) -> int:
    """SIGKILL every process of `uid` (as root) until none is left, zombies included (or `wait`
    seconds pass); returns how many were killed. The sandbox's processes end up orphans whose
    zombies the machine's init reaps in its own time (about a second here), and a zombie still
    counts against the next grading's process limit on this uid: so wait for them too."""
    killed, end = 0, time.monotonic() + wait
    while (processes := _processes_of(uid)) and time.monotonic() < end:
        for pid, alive in processes.items():
            if not alive:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return killed


def limited(command: list[str], resources: Resources) -> list[str]:
    """`command` under rlimits (prlimit), killed if the grading process dies (setpriv's
    parent-death signal). Wrappers rather than a preexec_fn: the grading process may hold
    JAX's threads, and running Python between fork and exec could deadlock."""
    if not (shutil.which("prlimit") and shutil.which("setpriv")):
        return command
    # RLIMIT_NPROC counts every process of a uid: only a uid of the sandbox's own (as root)
    # can take it without starving the grader's other processes.
    processes = [f"--nproc={resources.processes}"] if os.geteuid() == 0 else []
    return ["prlimit", f"--as={resources.memory_bytes}", *processes,
            f"--nofile={resources.open_files}", f"--fsize={resources.tmp_bytes}",
            f"--cpu={resources.cpu_seconds}", "--core=0", "--",
            "setpriv", "--pdeathsig", "KILL", "--", *command]


# --- supervising a worker -------------------------------------------------------------------


@dataclass
class Deadlines:
    """How long a worker may take."""

    stall: float
    """Seconds without any event (a submission loading, a case running)."""
    case: float
    """Seconds from a case's start to its result."""
    end: float
    """time.monotonic() by which everything must be done (the submission's budget)."""


@dataclass
class WorkerRun:
    """What a worker reported, across restarts."""

    results: dict[str, dict] = field(default_factory=dict)
    """Case id -> its validated "case" event (or a failure made up here)."""
    events: list[dict] = field(default_factory=list)
    """Every other event, in order ("loaded", "finished", and "died" made up here)."""


@dataclass
class _Attempt:
    current: str | None = None
    case_started: float = 0.0
    finished: bool = False
    why: str | None = None
    """Why the supervisor stopped the worker (None: it ended by itself)."""
    progressed: bool = False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def why_it_ended(returncode: int, resources: Resources) -> tuple[str, bool]:
    """(What ended a worker, was it killed from outside). bwrap reports a child killed by
    signal N as exit code 128 + N."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if number == signal.SIGKILL:
        return ("the process was killed from outside the sandbox (SIGKILL: the machine ran out "
                "of memory, or an administrator stopped it); it was retried once"), True
    if number == signal.SIGXCPU:
        return f"the process used up its {resources.cpu_seconds} s of CPU time", False
    if number:
        return (f"the process crashed with {_signal_name(number)} (out of memory? the limit is "
                f"{resources.memory_bytes / 2**30:g} GiB per process)"), False
    return f"the process exited with code {returncode} before finishing (os._exit? sys.exit?)", False


def _read_events(proc, attempt: _Attempt, run: WorkerRun, known: set[str], kind: str,
                 deadlines: Deadlines, on_result=None) -> None:
    """Read and validate the worker's events until it ends or a deadline or violation stops it."""
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    buffer, last_event = b"", time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if now > deadlines.end:
                attempt.why = "budget"
                return
            if attempt.current and now - attempt.case_started > deadlines.case:
                attempt.why = (f"it ran longer than {deadlines.case:g} s and was stopped (an infinite "
                               f"loop, or code that blocks the time limit?)")
                return
            if now - last_event > deadlines.stall:
                attempt.why = f"it made no progress for {deadlines.stall:g} s and was stopped (an infinite loop?)"
                return
            if not selector.select(timeout=0.25):
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 20)
            if not chunk:
                return  # the worker closed its end: it ended
            buffer += chunk
            if len(buffer) > MAX_LINE_BYTES:
                attempt.why = "violation: an event line longer than the protocol allows"
                return
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    event = read_event(line, known - set(run.results), kind)
                    _apply(event, attempt, run)
                except ProtocolError as e:
                    attempt.why = f"violation: {e}"
                    return
                if on_result and event["event"] == "case":
                    on_result(event)
                last_event = time.monotonic()
    finally:
        selector.close()


def _apply(event: dict, attempt: _Attempt, run: WorkerRun) -> None:
    kind = event["event"]
    if kind == "start":
        if attempt.current is not None:
            raise ProtocolError("a case started before the previous one ended")
        attempt.current, attempt.case_started = event["id"], time.monotonic()
    elif kind == "case":
        if attempt.current not in (None, event["id"]):
            raise ProtocolError("a result for a case other than the one running")
        run.results[event["id"]] = event
        attempt.current, attempt.progressed = None, True
    elif kind == "finished":
        attempt.finished = True
        run.events.append(event)
    elif kind != "progress":
        run.events.append(event)


def run_worker(command: list[str], request_for, case_ids: list[str], *, kind: str,
               deadlines: Deadlines, resources: Resources, isolation: Isolation,
               uid: int | None, function_of: dict[str, str], max_strikes: int = 2,
               cwd: str = "/", started: subprocess.Popen | None = None,
               on_result=None) -> WorkerRun:
    """Run a worker until every case in `case_ids` has a result.

    `request_for(skip)` makes the request text, given the case ids already done. A worker
    that dies or is stopped on a case costs that case (a "strike" for its function; after
    `max_strikes`, the function's remaining cases are judged from that); one killed from
    outside is retried once. The budget (`deadlines.end`) bounds everything.
    `started`: the first attempt's process, already started by `start_worker` (its start-up
    overlapped other work). `on_result(event)` sees each validated case result as it comes."""
    run, strikes, outside_kills = WorkerRun(), {}, set()
    while (pending := [i for i in case_ids if i not in run.results]):
        if time.monotonic() > deadlines.end:
            _fail(run, pending, "not graded: the submission used up its grading budget")
            break
        attempt = _Attempt()
        proc = started or start_worker(command, resources=resources, isolation=isolation, uid=uid, cwd=cwd)
        started = None
        try:
            proc.stdin.write(request_for(sorted(run.results)).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        _read_events(proc, attempt, run, set(case_ids), kind, deadlines, on_result)
        _stop(proc, attempt.why is None, uid)
        if not (attempt.finished and attempt.why is None):
            _blame(run, attempt, proc.returncode, resources, case_ids, function_of, strikes,
                   outside_kills, max_strikes)
    return run


def start_worker(command: list[str], *, resources: Resources, isolation: Isolation,
                 uid: int | None, cwd: str = "/") -> subprocess.Popen:
    """Start `command` isolated and limited; it reads its request on stdin (`run_worker`
    writes it). End a worker that never gets one with `stop_worker`."""
    full, where = isolated(command, isolation, uid, resources, cwd)
    debug = os.environ.get(DEBUG_VARIABLE)
    return subprocess.Popen(limited(full, resources), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=None if debug else subprocess.DEVNULL, cwd=where,
                            env=_host_env(isolation), start_new_session=True)


def stop_worker(proc: subprocess.Popen, uid: int | None) -> None:
    """End a worker from `start_worker` that was not needed after all (nothing to do for
    one that `run_worker` ran: it is gone, and its pid may be another process's by now)."""
    if proc.returncode is not None:
        return
    proc.stdin.close()
    _stop(proc, False, uid)


def isolated(command: list[str], isolation: Isolation, uid: int | None, resources: Resources,
             cwd: str, shared: tuple[str, str] | None = None) -> tuple[list[str], str]:
    """(`command` wrapped in the isolation, the folder it starts in). `shared` = (host folder,
    path inside) is the one writable host folder, when a run needs one (under the uid
    fallback it is used as it is, and is the worker's home)."""
    if isolation.level == "bubblewrap":
        return bwrap_command(command, uid, resources, shared), cwd
    if isolation.level == "uid" and uid is not None:
        if shared:
            return uid_command(command, uid, shared[0]), shared[0]
        home = os.path.join(tempfile.gettempdir(), f"kit-sandbox-{uid}")
        shutil.rmtree(home, ignore_errors=True)  # nothing of an earlier grading survives
        os.makedirs(home, mode=0o700)
        os.chown(home, uid, uid)
        return uid_command(command, uid, home), home
    return command, cwd


def _blame(run: WorkerRun, attempt: _Attempt, returncode: int, resources: Resources,
           case_ids: list[str], function_of: dict[str, str], strikes: dict, outside_kills: set,
           max_strikes: int) -> None:
    """Record why a worker stopped early: against the case it was on (a strike for its
    function), or against every case left when it never reached one."""
    why, outside = _describe_end(attempt, returncode, resources)
    case = attempt.current or ""  # "": between cases, or while loading the submission
    if outside and case not in outside_kills:
        outside_kills.add(case)  # killed from outside: retried once, not blamed
        return
    if not case:
        if not attempt.progressed:  # retrying would only do the same again
            _fail(run, [i for i in case_ids if i not in run.results], f"the submission could not be run: {why}")
            run.events.append({"event": "died", "message": why})
        return
    run.results[case] = _failure(case, why)
    name = function_of.get(case, "")
    strikes.setdefault(name, []).append(why)
    if len(strikes[name]) >= max_strikes:
        rest = [i for i in case_ids if i not in run.results and function_of.get(i) == name]
        _fail(run, rest, f"not run: {max_strikes} earlier cases of {name} already failed "
                         f"({strikes[name][-1]})")


def _describe_end(attempt: _Attempt, returncode: int, resources: Resources) -> tuple[str, bool]:
    if attempt.why == "budget":
        return "the submission used up its grading budget", False
    if attempt.why and attempt.why.startswith("violation: "):
        return ("the submission wrote to the graders' channel something that is not part of "
                f"the grading protocol ({attempt.why[len('violation: '):]})"), False
    if attempt.why:
        return attempt.why, False
    return why_it_ended(returncode, resources)


def _stop(proc, ended_by_itself: bool, uid: int | None) -> None:
    """Make sure the worker and everything it started are gone."""
    if ended_by_itself:
        try:
            proc.wait(timeout=10)  # its stdout closed: let it exit, to read its real status
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # bwrap is the PID namespace's parent: all go
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    proc.stdout.close()
    if uid is not None:
        kill_user(uid)


def _host_env(isolation: Isolation) -> dict:
    """The environment the worker starts with (bwrap clears it again inside the sandbox)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "JAX_", "XLA_")) and k not in ("HOME",)}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=XLA_FLAGS,
               HOME=tempfile.gettempdir() if not isolation.sandboxed else "/scratch")
    return env


def _failure(case_id: str, message: str) -> dict:
    return {"event": "case", "id": case_id, "status": "error", "message": message,
            "timed_out": False}


def _fail(run: WorkerRun, ids: list[str], message: str) -> None:
    for i in ids:
        run.results.setdefault(i, _failure(i, message))


def python_command(module_main: str) -> list[str]:
    """This Python, isolated from PYTHONPATH and the user's site, running `module:main` of
    the `assignments` runtime this process uses (the only kit code the sandbox can see; it
    is put first on the path, so an editable install, a wheel and an unpacked Gradescope
    bundle all work)."""
    import assignments

    module, func = module_main.split(":")
    runtime = os.path.dirname(os.path.dirname(os.path.abspath(assignments.__file__)))
    return [sys.executable, "-I", "-c",
            f"import sys; sys.path.insert(0, {runtime!r}); from {module} import {func}; sys.exit({func}())"]
