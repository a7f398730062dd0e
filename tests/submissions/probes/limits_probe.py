"""A probe, not an attack: it reports, from inside the sandbox, the limits its worker runs
under, so a test can check that every grading setting reaches the worker. Its first cell
(the whole module, here) ends by sleeping past a short cell limit, after defining the
functions; shard_average_jit reports; roll_diff sleeps past the case limit."""
import os
import resource
import time


def _mib(path: str) -> int:
    stat = os.statvfs(path)
    return stat.f_blocks * stat.f_frsize // 2**20


def shard_average_jit(A, *, mesh):
    address_space = resource.getrlimit(resource.RLIMIT_AS)[0]
    processes = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    file_size = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    shmmax = int(open("/proc/sys/kernel/shmmax").read())
    raise RuntimeError(f"probe: as={address_space // 2**20}MiB nproc={processes} fsize={file_size // 2**20}MiB "
                       f"tmp={_mib('/tmp')}MiB scratch={_mib('/scratch')}MiB shm={_mib('/dev/shm')}MiB "
                       f"shmmax={shmmax // 2**20}MiB")


def roll_diff(A, *, mesh, shift):
    time.sleep(30)


time.sleep(float("{sleep_s}") if "{sleep_s}"[0].isdigit() else 0)
