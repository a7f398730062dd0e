"""Tampering with the grader's channel: the events file the grading process reports
through is named in its request file (sys.argv[1]), so a submission can append lines to it.
These are malformed (a JSON list, events missing their keys); the grader must treat them as
noise, grade the unimplemented functions 0 and not crash.
"""
import json
import os
import sys

_request = json.load(open(sys.argv[1]))
with open(os.path.join(_request["out_dir"], "events.jsonl"), "a") as _events:
    _events.write("[]\n")
    _events.write(json.dumps({"event": "start"}) + "\n")
    _events.write(json.dumps({"event": "case", "id": ["shard_average_jit__0"], "status": "ok"}) + "\n")


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
