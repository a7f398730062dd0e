"""The judging child process: compile, inspect, run and compare exported artifacts.

Trusted code, but it runs programs compiled from student code, which can loop forever
or exhaust memory; so it runs apart from the grading parent, under the same protocol
as the export worker (`graders.sandbox.run_worker`): one JSON line per event on stdout.

Usage: python -m graders.judge_worker REQUEST.json
"""
from __future__ import annotations

import json
import resource
import sys


def main(request_path: str) -> int:
    with open(request_path) as f:
        request = json.load(f)
    from assignments.export_worker import event_channel

    emit = event_channel(silence=(1,))  # XLA's own chatter must not corrupt the event stream

    limit = request["memory_bytes"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    from assignments.devices import setup_devices

    setup_devices(8)
    from graders.harness import judge_case, selected_assignment
    from graders.hidden import hidden_cases

    assignment = selected_assignment(request["assignment"], request["only"])
    cases = hidden_cases(assignment)
    timings: dict[str, float] = {}
    skip = set(request.get("skip", []))
    for job in request["jobs"]:
        if job["id"] in skip:
            continue
        part = assignment.part(job["part"])
        case = cases[part.name][job["index"]]
        emit(event="start", id=job["id"])
        result = judge_case(assignment, part, case, job["export"], request["seed"] + job["index"], timings)
        emit(event="case", id=job["id"], values_ok=result.values_ok, rule_ok=result.rule_ok,
             problems=result.problems,
             analysis=None if result.analysis is None else result.analysis.to_json())
    emit(event="finished", timings=timings)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
