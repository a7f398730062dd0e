"""The sandbox every piece of student code runs in.

Every worker that runs student code or a program compiled from it (`graders.sandboxed`: the
export worker, the judge, the multi-controller runs) runs under bubblewrap (`bwrap`, the
sandbox behind Flatpak):
- an unprivileged user with no capabilities and `no_new_privs`: as root, the worker runs as
  a uid of its own (one per concurrent grading, `Slot`) inside a user namespace; as another
  user, as that user inside a user namespace;
- its own PID, network, mount, IPC, UTS and user namespaces, with no further user namespaces;
- a read-only view of only the interpreter, the environment's packages, the `assignments`
  runtime and `graders/sandboxed`; the rest of `graders/`, `solutions/`, the course folders,
  `$HOME`, the host's `/tmp` and other gradings do not exist there;
- its own empty `/tmp`, `/scratch` and `/dev/shm`, each a tmpfs with a size cap, a
  read-only `/dev`, and System V shared memory bounded;
- a memory cgroup of its own bounding all of its memory (`graders.cgroups`), where the
  machine allows one; rlimits on address space, processes, open files, file size and CPU time;
- everything it started dies with it: the sandbox is a PID namespace whose init is killed
  when grading ends, and which dies with the grading process (`--die-with-parent`).
Requests go in on stdin and events come back on stdout (`graders.sandboxed.protocol`), read
by `graders.supervisor`; nothing on the host is shared with the worker, so no other process
can reach a grading's channel.

Where bubblewrap cannot run, grading refuses untrusted work unless asked explicitly for no
isolation (`Limits.sandbox = "none"`), and `results.json` records which isolation was used.
"""
from __future__ import annotations

import fcntl
import functools
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from . import cgroups
from .files import write_atomic
from .settings import KIT_ROOT, DEVICES

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
    """What one sandboxed worker may use (`graders.settings.Limits` sets each)."""

    memory_bytes: int
    """All the memory of the worker (its cgroup: processes, tmpfs, shared memory)."""
    tmp_bytes: int
    """Size of each of /tmp, /scratch and /dev/shm (tmpfs) and of System V shared memory."""
    processes: int
    """Processes and threads of the worker (XLA starts dozens of threads)."""
    cpu_seconds: int
    """CPU time of each process (all its threads)."""
    open_files: int = 1024

    @property
    def address_space_bytes(self) -> int:
        """The address space of each process (an rlimit): JAX reserves several times what it
        touches (about 1.6 GB of address space for 200 MB of memory), so at least 8 GiB."""
        return max(4 * self.memory_bytes, 8 * 2**30)

    @classmethod
    def of(cls, limits) -> "Resources":
        """A worker's share of a grading's `Limits`."""
        return cls(memory_bytes=limits.memory_bytes, tmp_bytes=limits.tmp_bytes,
                   processes=limits.processes, cpu_seconds=limits.cpu_seconds)


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
    """Folders a worker may read: the interpreter, the environment's packages, the
    `assignments` runtime and the sandboxed workers (`graders/sandboxed`), nothing else."""
    import sysconfig

    import assignments

    from . import sandboxed

    roots = ["/usr", sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"], os.path.dirname(os.path.abspath(assignments.__file__)),
             os.path.dirname(os.path.abspath(sandboxed.__file__))]
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
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise RuntimeError(f"{folder} is not a folder of this user's that only it can write: "
                           f"remove it (the graders recreate it)")
    args = ["--perms", "0755", "--dir", "/etc"]
    for name, text in (("hosts", f"127.0.0.1 localhost {HOSTNAME}\n::1 localhost\n"),
                       ("nsswitch.conf", "hosts: files\n")):
        path = os.path.join(folder, name)
        _write_once(path, text)
        args += ["--ro-bind", path, f"/etc/{name}"]
    return args


def _write_once(path: str, text: str) -> None:
    """Make `path` hold `text` without ever changing a file in place: running sandboxes of
    other processes have the current file bound as their /etc/hosts, and a rewrite in place
    shows them an empty file while it lasts (gloo then fails to resolve the host name). A
    file already right is left alone; otherwise a new one is renamed over it."""
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    write_atomic(path, text, mode=0o644)


def _view() -> list[str]:
    """bwrap arguments that build the worker's read-only view of the filesystem."""
    args = list(_etc_files())
    for root in readable_roots():
        parts = root.strip("/").split("/")
        for i in range(1, len(parts)):  # intermediate folders traversable by the worker
            args += ["--perms", "0755", "--dir", "/" + "/".join(parts[:i])]
        args += ["--ro-bind", root, root]
    return args + _merged_usr_links()


XLA_FLAGS = f"--xla_force_host_platform_device_count={DEVICES} --xla_backend_optimization_level=0"
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


def _shared_memory_limits(resources: Resources, settable: bool | None = None) -> list[str]:
    """A prefix that bounds System V shared memory in the sandbox's own IPC namespace (at most
    `tmp_bytes` in all), then runs the command. The pages would belong to no process, so no
    rlimit sees them; a memory cgroup charges them too, and this bounds them where there is
    none. Empty where this kernel keeps those limits read-only in the namespace
    (`ipc_limits_settable`): the memory cgroup alone bounds them there."""
    if not (ipc_limits_settable() if settable is None else settable):
        return []
    pages = max(1, resources.tmp_bytes // 4096)
    limits = (f"echo {resources.tmp_bytes} > /proc/sys/kernel/shmmax && echo {pages} > "
              f"/proc/sys/kernel/shmall && echo 16 > /proc/sys/kernel/shmmni || exit 126")
    return ["sh", "-c", f'{limits}; exec "$@"', "sh"]


def bwrap_command(command: list[str], uid: int | None, resources: Resources,
                  shared: tuple[str, str] | None = None, ipc_limits: bool | None = None) -> list[str]:
    """`command` wrapped in bubblewrap. As root (`uid` given), an outer bwrap builds the
    namespaces and the view, drops to `uid` with setpriv, and an inner unprivileged bwrap
    adds the user namespace; otherwise one unprivileged bwrap does it all. `shared` =
    (host folder, path inside) is the one writable host folder, when a run needs one.
    Every writable filesystem is a tmpfs with a size (/tmp, /scratch, /dev/shm), /dev is
    read-only, and System V shared memory is bounded (`_shared_memory_limits`)."""
    under_tmp = [arg for root in readable_roots() if root.startswith("/tmp/")
                 for arg in ("--ro-bind", root, root)]  # back on top of the private /tmp
    outer_share = ["--bind", shared[0], shared[1]] if shared else []
    inner_share = ["--bind", shared[1], shared[1]] if shared else []
    size = str(resources.tmp_bytes)
    dev = ["--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    private = ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/scratch", "--chdir", "/scratch"]
    user = ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--die-with-parent", "--new-session"]
    if uid is None:
        return ["bwrap", "--unshare-all", "--hostname", HOSTNAME, *user, *_view(), "--proc", "/proc", *dev,
                *private, *under_tmp, *outer_share, *_environment(), "--",
                *_shared_memory_limits(resources, ipc_limits), *command]
    outer = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--hostname", HOSTNAME,
             "--unshare-cgroup-try", "--die-with-parent", "--new-session",
             "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
             *_view(), "--proc", "/proc", "--dev", "/dev",
             "--perms", "0755", "--dir", "/tmp", "--perms", "0755", "--dir", "/scratch", *outer_share, "--"]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]
    inner = ["bwrap", *user, "--ro-bind", "/", "/", *dev, *private, *under_tmp, *inner_share,
             *_environment(), "--"]
    # As root the IPC namespace belongs to the outer sandbox: its limits are set there.
    return [*outer, *_shared_memory_limits(resources, ipc_limits), *drop, *inner, *command]


PROBE_RESOURCES = Resources(memory_bytes=2**30, tmp_bytes=2**24, processes=64, cpu_seconds=60)
PROBE = [sys.executable, "-I", "-c", "import os; print(os.getuid())"]
PROBE_UID = SLOT_UID_BASE + SLOTS - 1


@functools.lru_cache(maxsize=2)
def _probe(ipc_limits: bool) -> subprocess.CompletedProcess | OSError | subprocess.TimeoutExpired:
    """The probe run in the sandbox, with or without the System V limits prefix. Cached:
    where the limits can be set, `ipc_limits_settable` and `bubblewrap_problem` read one run
    (one sandbox start fewer in every grading's set-up)."""
    probe = bwrap_command(PROBE, PROBE_UID if os.geteuid() == 0 else None, PROBE_RESOURCES, ipc_limits=ipc_limits)
    try:
        return subprocess.run(probe, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return e


@functools.lru_cache(maxsize=1)
def ipc_limits_settable() -> bool:
    """Can the sandbox set System V limits in its own IPC namespace? (Some kernels keep
    /proc/sys/kernel/shm* read-only there: the prefix then exits 126 before the command.)
    True when bubblewrap itself fails: `bubblewrap_problem` reports that."""
    if not shutil.which("bwrap"):
        return True
    proc = _probe(True)
    return isinstance(proc, Exception) or not (proc.returncode == 126 and not proc.stdout.strip())


@functools.lru_cache(maxsize=1)
def bubblewrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox a worker on this machine, or None when it can."""
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        return "setpriv (util-linux) is missing"
    proc = _probe(ipc_limits_settable())
    if isinstance(proc, Exception):
        return f"bubblewrap failed to start ({proc})"
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


def protect_hidden() -> list[str]:
    """Make everything in the kit's folder readable by its owner only (the fallback's wall),
    except what the workers run or read: the `assignments` runtime, `graders/__init__.py` and
    `graders/sandboxed` (`graders/` stays listable: Python's import reads the listing), and
    any folder holding the interpreter or its packages (a `.venv` inside the kit). So the
    solutions, the sources, the secret, the graded results, nbgrader's database (which keeps
    the hidden tests) and a built Gradescope bundle are all out of reach. Returns what it
    made private."""
    roots = readable_roots()

    def holds_a_root(path: str) -> bool:
        return any(r == path or r.startswith(path + "/") or path.startswith(r + "/") for r in roots)

    graders = os.path.join(KIT_ROOT, "graders")
    private = [os.path.join(KIT_ROOT, n) for n in os.listdir(KIT_ROOT)
               if n != "graders" and not holds_a_root(os.path.join(KIT_ROOT, n))]
    if os.path.isdir(graders):
        os.chmod(graders, 0o755)
        private += [os.path.join(graders, n) for n in os.listdir(graders) if n not in ("sandboxed", "__init__.py")]
    private = [p for p in private if not os.path.islink(p)]
    for path in private:
        os.chmod(path, os.stat(path).st_mode & 0o700)
    return private


def memory_bound(level: str) -> str:
    """How a worker's memory is bounded here, in words (for results.json)."""
    problem = cgroups.problem()
    if problem is None:
        return "memory: a cgroup per worker bounds all of it (processes, tmpfs, shared memory)"
    if level == "bubblewrap":
        system_v = ("System V limits" if ipc_limits_settable() else
                    "no System V limit (this kernel keeps them read-only in the sandbox's IPC namespace)")
        return (f"memory: no cgroup ({problem}); bounded by sized tmpfs (/tmp, /scratch, /dev/shm), a "
                f"read-only /dev, {system_v} and each process's address space")
    return (f"memory: no cgroup ({problem}); each process's address space only (without bubblewrap "
            f"there is no private tmpfs or IPC namespace: the host's /dev/shm is shared)")


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
                                       f"PID/network/mount/IPC namespaces, read-only runtime, private "
                                       f"/tmp; {memory_bound('bubblewrap')}")
    fallback = uid_fallback_problem() if sandbox in ("auto", "uid") else "not asked for"
    if fallback is None:
        protect_hidden()
        return Isolation("uid", f"dedicated uid (bubblewrap unavailable: {problem}): a uid of its own, "
                                f"no capabilities, rlimits, kit's hidden folders private, "
                                f"{'no network' if _can_unshare_net() else 'NETWORK REACHABLE'}; "
                                f"the rest of the filesystem is visible read-only by permissions; "
                                f"{memory_bound('uid')}")
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
    return ["prlimit", f"--as={resources.address_space_bytes}", *processes,
            f"--nofile={resources.open_files}", f"--fsize={resources.tmp_bytes}",
            f"--cpu={resources.cpu_seconds}", "--core=0", "--", *dies_with_parent(command)]


def dies_with_parent(command: list[str]) -> list[str]:
    """`command`, killed when the thread that started it ends (setpriv's parent-death signal),
    so that no grading outlives a killed grader; `command` itself where setpriv is missing."""
    return ["setpriv", "--pdeathsig", "KILL", "--", *command] if shutil.which("setpriv") else command


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


def host_env(isolation: Isolation) -> dict:
    """The environment the worker starts with (bwrap clears it again inside the sandbox)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "JAX_", "XLA_")) and k not in ("HOME",)}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=XLA_FLAGS,
               HOME=tempfile.gettempdir() if not isolation.sandboxed else "/scratch")
    return env


def python_command(module_main: str) -> list[str]:
    """This Python, isolated from PYTHONPATH and the user's site, running `module:main` of
    the sandboxed workers (`graders.sandboxed`) with the `assignments` runtime this process
    uses (the only kit code the sandbox can see; both go first on the path, so an editable
    install, a wheel and an unpacked Gradescope bundle all work)."""
    module, func = module_main.split(":")
    paths = list(dict.fromkeys([_runtime_parent(), KIT_ROOT]))
    return [os.path.normpath(sys.executable), "-I", "-c",
            f"import sys; sys.path[:0] = {paths!r}; from {module} import {func}; sys.exit({func}())"]


@functools.cache
def compile_worker_code() -> None:
    """Write the bytecode of what the workers import (the `assignments` runtime and
    `graders.sandboxed`), where it is missing or stale, once per grading process. The sandbox
    sees that code read-only, so without it every worker compiles about 8,000 lines from
    source (about 0.15 CPU-s each): so it goes when the graders run with
    PYTHONDONTWRITEBYTECODE set, as many container images and CI machines do. Best effort: a
    kit folder this user cannot write stays as it is."""
    import compileall

    for folder in (os.path.join(_runtime_parent(), "assignments"), os.path.join(KIT_ROOT, "graders", "sandboxed")):
        try:
            compileall.compile_dir(folder, quiet=2)
        except OSError:
            pass


def _runtime_parent() -> str:
    import assignments

    return os.path.dirname(os.path.dirname(os.path.abspath(assignments.__file__)))
