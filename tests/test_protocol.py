"""The grading protocol and its supervisor, on hand-made events and tiny fake workers."""
from __future__ import annotations

import base64
import io
import json
import sys
import time

import numpy as np
import pytest

from assignments.protocol import MAX_TEXT, ProtocolError, decode_tree, encode_tree, read_event
from graders.sandbox import Deadlines, Isolation, Resources, run_worker

KNOWN = {"f__0", "f__1"}


def line(**event) -> bytes:
    return json.dumps(event).encode()


@pytest.mark.parametrize("event, why", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not an object"),
    (line(event="start", id="g__0"), "a case this run does not have"),
    (line(event="start", id=7), "a case this run does not have"),
    (line(event="loaded", problems=[], run_submission_s="NaN"), "number of seconds"),
    (line(event="loaded", problems=[], run_submission_s=float("inf")), "number of seconds"),
    (line(event="finished", timings={"x": "slow"}), "number of seconds"),
    (line(event="case", id="f__0", status="great"), "status"),
    (line(event="case", id="f__0", status="ok", artifact="***"), "base64"),
    (line(event="case", id="f__0", status="ok", report={"type": "Array", "shape": "8x8"}), "shape"),
    (line(event="case", id="f__0", values_ok=1, rule_ok=True, problems=[]), "status"),
    (line(event="shutdown"), "unknown event"),
])
def test_malformed_export_events_are_refused(event, why):
    """Is every malformed or out-of-range export event refused with a reason?"""
    with pytest.raises(ProtocolError, match=why):
        read_event(event, KNOWN, "export")


def test_judge_events_are_checked_field_by_field():
    """Are a judge's flags booleans and its analysis a real program analysis?"""
    with pytest.raises(ProtocolError, match="true or false"):
        read_event(line(event="case", id="f__0", values_ok="yes", rule_ok=True, problems=[]), KNOWN, "judge")
    with pytest.raises(ProtocolError, match="program analysis"):
        read_event(line(event="case", id="f__0", values_ok=True, rule_ok=True, problems=[],
                        analysis={"collectives": 3}), KNOWN, "judge")
    ok = read_event(line(event="case", id="f__1", values_ok=True, rule_ok=False,
                         problems=["x" * 10_000] * 100), KNOWN, "judge")
    assert len(ok["problems"]) <= 12 and all(len(p) <= MAX_TEXT for p in ok["problems"])


def test_arrays_and_trees_round_trip_without_pickles():
    """Do arrays and tuples of arrays travel as .npy bytes, and is a pickle refused?"""
    tree = (np.arange(6, dtype=np.float32).reshape(2, 3), (np.int32(4), np.ones(2)))
    back = decode_tree(encode_tree(tree))
    assert np.array_equal(back[0], tree[0]) and back[0].dtype == np.float32
    assert np.array_equal(back[1][1], tree[1][1])
    buffer = io.BytesIO()  # an object array can only be saved as a pickle
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ProtocolError):
        decode_tree(base64.b64encode(buffer.getvalue()).decode())


FAKE = Isolation("none", "test")
RESOURCES = Resources(memory_bytes=2 * 2**30, cpu_seconds=60)


def fake_worker(script: str, ids: list[str], *, case=5.0, stall=5.0, budget=30.0, strikes=2):
    """Run a tiny Python 'worker' (no sandbox: these scripts are the test's own) that prints
    the given events, under the real supervisor."""
    command = [sys.executable, "-c", script]
    deadlines = Deadlines(stall=stall, case=case, end=time.monotonic() + budget)
    return run_worker(command, lambda skip: json.dumps({"skip": skip}), ids, kind="export",
                      deadlines=deadlines, resources=RESOURCES, isolation=FAKE, uid=None,
                      function_of={i: i.split("__")[0] for i in ids}, max_strikes=strikes)


PRELUDE = "import json, sys, os, time\nreq = json.loads(sys.stdin.read())\n" \
          "def emit(**e):\n    print(json.dumps(e), flush=True)\n"


def test_a_forged_result_for_another_case_stops_the_worker():
    """Is a result for a case other than the one running a violation, blamed on that case?"""
    script = PRELUDE + ("if 'f__0' not in req['skip']:\n"
                        "    emit(event='start', id='f__0'); emit(event='case', id='f__1', status='ok', artifact='')\n"
                        "else:\n"
                        "    emit(event='start', id='f__1'); emit(event='case', id='f__1', status='error', message='m')\n"
                        "    emit(event='finished', timings={})\n")
    run = fake_worker(script, ["f__0", "f__1"])
    assert "not part of the grading protocol" in run.results["f__0"]["message"]
    assert run.results["f__1"]["message"] == "m"


def test_a_hanging_case_costs_two_strikes_then_the_function_is_skipped():
    """Does a function whose cases hang cost two case deadlines, its other cases skipped?"""
    script = PRELUDE + ("for i in range(5):\n"
                        "    cid = f'f__{i}'\n"
                        "    if cid in req['skip']: continue\n"
                        "    emit(event='start', id=cid); time.sleep(60)\n")
    started = time.monotonic()
    run = fake_worker(script, [f"f__{i}" for i in range(5)], case=1.0)
    assert time.monotonic() - started < 10
    assert "ran longer than 1 s" in run.results["f__0"]["message"]
    assert "ran longer than 1 s" in run.results["f__1"]["message"]
    for i in (2, 3, 4):
        assert "not run: 2 earlier cases of f already failed" in run.results[f"f__{i}"]["message"]


def test_a_worker_killed_from_outside_is_retried_not_blamed(tmp_path):
    """Is a SIGKILL the supervisor did not send retried once, not blamed on the case?"""
    marker = str(tmp_path / "killed-once")
    script = PRELUDE + (f"if not os.path.exists({marker!r}):\n"
                        f"    open({marker!r}, 'w').close(); emit(event='start', id='f__0')\n"
                        "    import signal; os.kill(os.getpid(), signal.SIGKILL)\n"
                        "emit(event='start', id='f__0'); emit(event='case', id='f__0', status='error', message='ok')\n"
                        "emit(event='finished', timings={})\n")
    run = fake_worker(script, ["f__0"])
    assert run.results["f__0"]["message"] == "ok"


def test_the_budget_bounds_everything():
    """Does a worker that keeps sending progress forever stop at the submission's budget?"""
    script = PRELUDE + "while True:\n    emit(event='progress'); time.sleep(0.1)\n"
    started = time.monotonic()
    run = fake_worker(script, ["f__0", "f__1"], budget=2.0)
    assert time.monotonic() - started < 6
    assert all("budget" in r["message"] for r in run.results.values())


def test_a_worker_started_early_gets_its_request_later():
    """Does a worker started ahead (`start_worker`, as the judges are while the export runs)
    wait for its request, get graded like any other, and does `on_result` see each result as
    it comes? And does `stop_worker` end one that was never needed?"""
    from graders.sandbox import start_worker, stop_worker

    script = PRELUDE + ("for cid in ('f__0', 'f__1'):\n"
                        "    emit(event='start', id=cid); emit(event='case', id=cid, status='error', message=cid)\n"
                        "emit(event='finished', timings={})\n")
    command = [sys.executable, "-c", script]
    early = start_worker(command, resources=RESOURCES, isolation=FAKE, uid=None)
    time.sleep(0.5)  # it waits on stdin meanwhile
    assert early.poll() is None
    seen = []
    run = run_worker(command, lambda skip: json.dumps({"skip": skip}), ["f__0", "f__1"], kind="export",
                     deadlines=Deadlines(stall=5, case=5, end=time.monotonic() + 30), resources=RESOURCES,
                     isolation=FAKE, uid=None, function_of={"f__0": "f", "f__1": "f"},
                     started=early, on_result=lambda event: seen.append(event["id"]))
    assert early.returncode == 0 and seen == ["f__0", "f__1"]
    assert run.results["f__1"]["message"] == "f__1"
    stop_worker(early, None)  # already gone: nothing to do
    unused = start_worker([sys.executable, "-c", "import time; time.sleep(60)"], resources=RESOURCES,
                          isolation=FAKE, uid=None)
    stop_worker(unused, None)
    assert unused.returncode is not None


def test_cases_that_differ_only_in_values_are_traced_once():
    """Does the export worker trace one program per distinct abstract signature (problem2's
    routings differ only in their input values), sending its artifact for every such case,
    while a case with other shapes is traced again?"""
    from assignments.export_worker import export_part

    traced, events = [], []

    def exporter(fn, case):
        traced.append(case["id"])
        return b"program for " + str(case["args"][0]["shape"]).encode()

    def case(cid, rows):
        return {"id": cid, "mesh": [2, 4], "statics": {}, "axis_types": "auto", "takes_mesh": True,
                "args": [{"shape": [rows, 8], "dtype": "float32", "spec": ["X", None]}]}

    part = {"name": "f", "signature": "f(A, *, mesh)", "num_args": 1, "statics": [], "eager": False,
            "takes_mesh": True, "cases": [case("f__0", 16), case("f__1", 16), case("f__2", 32), case("f__3", 16)]}
    export_part(exporter, {"f": lambda a, *, mesh: a}, part, set(), 5.0, lambda **e: events.append(e))
    assert traced == ["f__0", "f__2"]
    results = {e["id"]: e for e in events if e["event"] == "case"}
    assert sorted(results) == ["f__0", "f__1", "f__2", "f__3"]
    assert results["f__1"]["artifact"] == results["f__3"]["artifact"] == results["f__0"]["artifact"]
    assert results["f__2"]["artifact"] != results["f__0"]["artifact"]
