"""Route 7: hold memory that no process owns. Pages in a tmpfs (/dev/shm, /tmp), in a memfd or
in System V shared memory belong to no process, so no rlimit sees them: unbounded, one
submission could hold half the machine and the kernel would kill the grader or a neighbour.

`shard_average_jit` measures how much each kind held before it was refused and reports it in
its error message (`held ... MiB`); `roll_diff` then grows memfds until something stops it.
Capped at CAP_MIB in all, so that the test can never endanger the machine it runs on."""
import ctypes
import errno
import os

CAP_MIB = int("{cap_mib}") if "{cap_mib}".isdigit() else 3072
MIB = 2**20
held = []  # keep everything alive while the worker lives


def _fill(write, limit_mib: int) -> int:
    """MiB written with `write(chunk)` before it fails (or `limit_mib` is reached)."""
    chunk, done = b"\1" * MIB, 0
    while done < limit_mib:
        try:
            write(chunk)
        except OSError:
            break
        done += 1
    return done


def dev_shm(limit_mib: int) -> int:
    f = open("/dev/shm/hold", "wb", buffering=0)
    held.append(f)
    return _fill(f.write, limit_mib)


def memfd(limit_mib: int) -> int:
    """MiB written into memfds of 32 MiB each (below any file-size limit) until refused."""
    total = 0
    while total < limit_mib:
        want = min(32, limit_mib - total)
        fd = os.memfd_create("hold")
        held.append(fd)
        got = _fill(lambda b: os.write(fd, b), want)
        total += got
        if got < want:
            break
    return total


def sysv(limit_mib: int) -> int:
    """MiB of System V segments made and touched (each then detached: it stays in memory)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    total = 0
    for size in (128, 32, 32, 32, 32):
        if total + size > limit_mib:
            break
        sid = libc.shmget(0, size * MIB, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        if sid < 0:
            continue  # larger than the namespace allows: try a smaller one
        address = libc.shmat(sid, None, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            continue
        ctypes.memset(address, 1, size * MIB)
        libc.shmdt(ctypes.c_void_p(address))
        total += size
    return total


def shard_average_jit(A, *, mesh):
    report = {"dev_shm": dev_shm(min(512, CAP_MIB)), "sysv": sysv(min(256, CAP_MIB))}
    raise RuntimeError("held " + " ".join(f"{k}={v}MiB" for k, v in report.items()))


def roll_diff(A, *, mesh, shift):
    got = memfd(CAP_MIB)
    raise RuntimeError(f"held memfd={got}MiB (errno {errno.errorcode.get(ctypes.get_errno(), 0)})")
