"""A control group per sandboxed worker: a bound on all of its memory, and on its processes.

An rlimit bounds one process's address space, but memory a sandbox holds in a tmpfs (its
`/tmp`, `/dev/shm`), in a memfd or in System V shared memory belongs to no process: only the
kernel's memory controller charges those pages to the group of processes that made them. So
each worker starts inside a cgroup of its own, made beneath the grader's own cgroup (never
elsewhere in the hierarchy), with
- cgroup v2: `memory.max`, `memory.swap.max` = 0 and `pids.max` (the grader's own group
  first hands those controllers down, its processes moving into a leaf: `_v2_delegate`);
- cgroup v1: `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, when swap is
  accounted) in the `memory` hierarchy and `pids.max` in the `pids` one.
The worker joins it before it runs anything (a shell prefix writes its own pid into the
group, then execs the sandbox), so everything it starts is inside. A worker that needs more
is killed by the kernel inside its group (never a neighbour), and `oom_kills` says so.

Where no cgroup can be made (not root under cgroup v1, no memory controller, a container that
forbids it), `WorkerCgroup.create` returns None and `problem()` says why; the sandbox then
relies on its fallback (sized tmpfs everywhere, read-only /dev, System V limits, rlimits).

A trusted process of the kit that parses what students send (`nbgrader autograde`) can bound
its own memory the same way (`bound_process`): it moves into a group of its own, `PROCESS`-<pid>,
beneath the group it was in, and the groups of its workers are made beside that one (as beside
`LEAF`), never beneath it, so that its bound and theirs stay apart.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import logging
import os
import signal
import time

log = logging.getLogger(__name__)
ROOT = "/sys/fs/cgroup"
_names = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per hierarchy: {"memory": "/a/b", "pids": "/", "": "/x"}
    ("" is the cgroup v2 unified hierarchy)."""
    found = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path
    return found


LEAF = "scaling-jax-kit-grader"
"""cgroup v2: the leaf the grader's own group's processes move into (see `_v2_delegate`)."""
PROCESS = "scaling-jax-kit-process"
"""The group a trusted process bounds itself in is `PROCESS`-<pid> (`bound_process`)."""


def _made_here(path: str) -> str:
    """The group beneath which groups are made for a process in `path`: its parent when `path`
    is a leaf the kit moved it into (`LEAF`, `PROCESS`-<pid>), else `path` itself."""
    name = os.path.basename(path.rstrip("/"))
    return os.path.dirname(path.rstrip("/")) if name == LEAF or name.startswith(PROCESS + "-") else path


def _v1_folder(controller: str, own: dict[str, str]) -> str | None:
    folder = os.path.join(ROOT, controller)
    if controller in own and os.path.isfile(os.path.join(folder, "cgroup.procs")):
        return os.path.join(folder, _made_here(own[controller]).lstrip("/"))
    return None


def _v2_folder(own: dict[str, str]) -> str | None:
    """The grader's own v2 group, where worker groups are made (its parent, once the grader
    moved into `LEAF`)."""
    for mount in (ROOT, os.path.join(ROOT, "unified")):
        controllers = os.path.join(mount, "cgroup.controllers")
        if "" in own and os.path.isfile(controllers):
            with open(controllers) as f:
                if "memory" in f.read().split():
                    return os.path.join(mount, _made_here(own[""]).lstrip("/"))
    return None


def _v2_delegate(folder: str) -> None:
    """Let the groups made beneath `folder` use the memory and pids controllers. cgroup v2
    hands controllers to a group's children only while the group itself holds no process,
    so when they are not handed down yet, every process of `folder` (the grader, and whatever
    shares its group) first moves into a leaf child, `LEAF`: what systemd does for a
    delegated subtree. An OSError means it cannot be done here (`problem()` says so)."""
    with open(os.path.join(folder, "cgroup.subtree_control")) as f:
        if "memory" in f.read().split():
            return
    with open(os.path.join(folder, "cgroup.controllers")) as f:
        available = f.read().split()
    wanted = [c for c in ("memory", "pids") if c in available]
    leaf = os.path.join(folder, LEAF)
    os.makedirs(leaf, exist_ok=True)
    with open(os.path.join(folder, "cgroup.procs")) as f:
        pids = f.read().split()
    for pid in pids:
        try:
            _write(os.path.join(leaf, "cgroup.procs"), pid)
        except ProcessLookupError:  # it exited meanwhile
            pass
    _write(os.path.join(folder, "cgroup.subtree_control"), " ".join(f"+{c}" for c in wanted))


def _write(path: str, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _read_number(path: str, key: str | None = None) -> int | None:
    """A number from a cgroup file: the whole file, or the line `key N` of a keyed file."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    if key is None:
        return int(text.strip()) if text.strip().isdigit() else None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


class WorkerCgroup:
    """The cgroup(s) of one sandboxed worker: made by `create`, joined through `command`,
    read with `oom_kills` and `peak_bytes`, removed by `close`."""

    def __init__(self, version: int, folders: dict[str, str], memory_bytes: int):
        self.version, self.folders, self.memory_bytes = version, folders, memory_bytes

    @classmethod
    def create(cls, memory_bytes: int, processes: int) -> "WorkerCgroup | None":
        """A new cgroup (beneath this process's own) bounding memory and processes, or None
        when none can be made here (`problem()` says why)."""
        if problem() is not None:
            return None
        name = f"scaling-jax-kit-{os.getpid()}-{next(_names)}"
        try:
            return _make(name, memory_bytes, processes)
        except OSError as e:
            log.warning("no cgroup for a worker (%s); the sandbox's fallback bounds apply", e)
            return None

    def command(self, command: list[str]) -> list[str]:
        """`command`, first moving its own process into this cgroup (so all it starts is in)."""
        procs = [os.path.join(folder, "cgroup.procs") for folder in self.folders.values()]
        join = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
        return ["sh", "-c", join, "sh", str(len(procs)), *procs, *command]

    def oom_kills(self) -> int:
        """Processes the kernel killed in this cgroup for going over its memory limit."""
        memory = self.folders["memory"]
        if self.version == 2:
            return _read_number(os.path.join(memory, "memory.events"), "oom_kill") or 0
        return _read_number(os.path.join(memory, "memory.oom_control"), "oom_kill") or 0

    def peak_bytes(self) -> int | None:
        """The most memory the worker held at once, everything charged to it included."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return _read_number(os.path.join(self.folders["memory"], name))

    def close(self) -> None:
        """Kill whatever is left in the cgroup and remove it."""
        for folder in dict.fromkeys(self.folders.values()):
            for _ in range(50):
                try:
                    with open(os.path.join(folder, "cgroup.procs")) as f:
                        pids = [int(p) for p in f.read().split()]
                    for pid in pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy: processes still exiting
                    time.sleep(0.02)
            else:
                log.warning("could not remove cgroup %s", folder)


def _make(name: str, memory_bytes: int, processes: int) -> WorkerCgroup:
    own = _own_cgroups()
    v2 = _v2_folder(own)
    if v2 is not None:
        _v2_delegate(v2)
        folder = os.path.join(v2, name)
        os.mkdir(folder)
        cgroup = WorkerCgroup(2, {"memory": folder, "pids": folder}, memory_bytes)
        try:
            _write(os.path.join(folder, "memory.max"), memory_bytes)
            _write(os.path.join(folder, "memory.swap.max"), 0)
            if os.path.exists(os.path.join(folder, "pids.max")):
                _write(os.path.join(folder, "pids.max"), processes)
        except OSError:
            cgroup.close()
            raise
        return cgroup
    folders = {c: os.path.join(_v1_folder(c, own), name) for c in ("memory", "pids") if _v1_folder(c, own)}
    for folder in folders.values():
        os.mkdir(folder)
    cgroup = WorkerCgroup(1, folders, memory_bytes)
    try:
        _write(os.path.join(folders["memory"], "memory.limit_in_bytes"), memory_bytes)
        memsw = os.path.join(folders["memory"], "memory.memsw.limit_in_bytes")
        if os.path.exists(memsw):  # swap accounted: no swapping out of the limit either
            _write(memsw, memory_bytes)
        if "pids" in folders:
            _write(os.path.join(folders["pids"], "pids.max"), processes)
    except OSError:
        cgroup.close()
        raise
    return cgroup


@functools.lru_cache(maxsize=1)
def problem() -> str | None:
    """Why no worker cgroup can be made here, or None when one can (tried once)."""
    try:
        own = _own_cgroups()
    except OSError:
        return "this system has no cgroups (/proc/self/cgroup)"
    v2, v1 = _v2_folder(own), _v1_folder("memory", own)
    if v2 is None and v1 is None:
        return "no cgroup hierarchy with a memory controller is mounted"
    parent = v2 or v1
    if not os.access(parent, os.W_OK):
        return (f"the grader may not make cgroups beneath its own ({parent}): run the graders as "
                f"root, or in a cgroup delegated to their user")
    try:
        probe = _make(f"scaling-jax-kit-probe-{os.getpid()}", 64 * 2**20, 16)
    except OSError as e:
        return f"making a cgroup beneath {parent} failed ({e.strerror or e})"
    probe.close()
    return None


def bound_process(memory_bytes: int) -> tuple[bool, str]:
    """Move this process (all its threads, and what it starts from now on) into a memory cgroup
    of its own, `PROCESS`-<pid>, made beneath its own group and bounded at `memory_bytes`
    (swap included, where it is accounted): (True, where) when it is bounded, already or now,
    (False, why not) when no cgroup can be made here; never raises. The group is removed when
    the process exits (a group left by a process killed outright, empty, is removed by the
    next one). The memory it already held stays charged where it was, unless the kernel moves
    it along (cgroup v1's `memory.move_charge_at_immigrate`, asked for)."""
    try:
        own = _own_cgroups()
    except OSError:
        return False, "this system has no cgroups (/proc/self/cgroup)"
    v2, v1 = _v2_folder(own), _v1_folder("memory", own)
    current = own.get("" if v2 else "memory", "")
    if os.path.basename(current.rstrip("/")).startswith(PROCESS + "-"):
        return True, f"already in its own memory cgroup ({current})"
    parent = v2 or v1
    if parent is None:
        return False, "no cgroup hierarchy with a memory controller is mounted"
    if not os.access(parent, os.W_OK):
        return False, f"it may not make cgroups beneath its own ({parent}): run it as root, or in a delegated cgroup"
    _remove_stale(parent)
    folder = os.path.join(parent, f"{PROCESS}-{os.getpid()}")
    try:
        if v2:
            _v2_delegate(parent)
        os.mkdir(folder)
    except OSError as e:
        return False, f"making a cgroup beneath {parent} failed ({e.strerror or e})"
    try:
        if v2:
            _write(os.path.join(folder, "memory.max"), memory_bytes)
            _write(os.path.join(folder, "memory.swap.max"), 0)
        else:
            _write(os.path.join(folder, "memory.limit_in_bytes"), memory_bytes)
            memsw = os.path.join(folder, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):
                _write(memsw, memory_bytes)
            try:  # what it holds already counts too (deprecated in newer kernels: then it stays behind)
                _write(os.path.join(folder, "memory.move_charge_at_immigrate"), 3)
            except OSError:
                pass
        _write(os.path.join(folder, "cgroup.procs"), os.getpid())
    except OSError as e:
        with contextlib.suppress(OSError):
            os.rmdir(folder)
        return False, f"bounding its memory in {folder} failed ({e.strerror or e})"
    back = os.path.join(parent, LEAF) if v2 else parent  # v2: a group that hands controllers down holds no process
    atexit.register(_leave, folder, back)
    return True, folder


def _leave(folder: str, back: str) -> None:
    """At exit: move this process back where it came from, and remove its group."""
    with contextlib.suppress(OSError):
        _write(os.path.join(back, "cgroup.procs"), os.getpid())
        os.rmdir(folder)


def _remove_stale(parent: str) -> None:
    """Remove the `PROCESS` groups beneath `parent` of processes that no longer exist (killed
    outright: no exit handler ran). A group that still holds a process is never removed."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name[len(PROCESS) + 1:] if name.startswith(PROCESS + "-") else ""
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(parent, name))
