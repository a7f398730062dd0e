"""Tampering with the grader's channel: the export worker reports to the grading process as
JSON lines on a pipe, and this module writes forged lines to every pipe it holds open:
malformed JSON, events missing their keys, unknown ids, and a claim that a case exported
fine when it did not. The grader must treat them as noise and grade every function 0.
"""
import json
import os
import stat

_lines = [
    "[]",
    json.dumps({"event": "start"}),
    json.dumps({"event": "case", "id": ["shard_average_jit__0"], "status": "ok"}),
    json.dumps({"event": "case", "id": "shard_average_jit__0", "status": "ok", "file": "/etc/passwd"}),
    json.dumps({"event": "case", "id": "roll_diff__0", "values_ok": True, "rule_ok": True}),
    json.dumps({"event": "unreadable"}),
    json.dumps({"event": "finished"}),
]
for _fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            os.write(_fd, ("\n".join(_lines) + "\n").encode())
    except OSError:
        pass


def shard_average_jit(A, *, mesh):
    raise NotImplementedError()


def shard_average_shard_map(A, *, mesh):
    raise NotImplementedError()


def block_average_jit(A, *, mesh):
    raise NotImplementedError()


def block_average_shard_map(A, *, mesh):
    raise NotImplementedError()


def roll_diff(A, *, mesh, shift):
    raise NotImplementedError()
