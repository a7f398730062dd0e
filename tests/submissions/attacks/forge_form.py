"""Route 6b: forging a case's answer in the wrong form. Before running its function, the
submission writes on every pipe it holds an export event for a jit case that carries an eager
report (the form only `place` answers in), hoping the grader reads an artifact that is not
there and fails, which would blame the kit and buy a regrade."""
import json
import os


def _forge(case_id):
    line = json.dumps({"event": "case", "id": case_id, "status": "ok", "report": {"type": "x"}}) + "\n"
    for fd in range(3, 64):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                os.write(fd, line.encode())
        except OSError:
            pass


def shard_average_jit(A, *, mesh):
    for i in range(8):
        _forge(f"shard_average_jit__{i}")
    raise NotImplementedError
