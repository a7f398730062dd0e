"""The grading protocol and its supervisor, on hand-made events and tiny fake workers (no
sandbox, no JAX: these scripts are the test's own)."""
from __future__ import annotations

import base64
import io
import json
import sys
import threading
import time

import numpy as np
import pytest

from assignments.contract import Problem
from graders.sandbox import Isolation, Resources
from graders.sandboxed.protocol import MAX_TEXT, ProtocolError, decode_tree, encode_tree, job_text, read_event
from graders.supervisor import (Deadlines, JobBoard, WorkerNeverReady, WorkerProcess, WorkerSetup, ending, Attempt,
                                run_stream, run_worker)

KNOWN = {"f__0", "f__1"}


def line(**event) -> bytes:
    return json.dumps(event).encode()


def _said(result) -> list[str]:
    """The messages of a judged case's problems (a case the supervisor made up has none)."""
    return [p.message for p in result.problems]


@pytest.mark.parametrize("event, why", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not an object"),
    (line(event="start", id="g__0"), "a case this run does not have"),
    (line(event="start", id=7), "a case this run does not have"),
    (line(event="loaded", problems=[], run_submission_s="NaN"), "number of seconds"),
    (line(event="loaded", problems=[], run_submission_s=float("inf")), "number of seconds"),
    (line(event="finished", timings={"x": "slow"}), "number of seconds"),
    (line(event="case", id="f__0", status="great"), "status"),
    (line(event="case", id="f__0", status="error", message="x", while_tracing="yes"), "while_tracing"),
    (line(event="case", id="f__0", status="ok", artifact="***"), "base64"),
    (line(event="case", id="f__1", status="ok", report={"type": "Array", "shape": "8x8"}), "shape"),
    (line(event="case", id="f__0", values_ok=1, rule_ok=True, problems=[]), "status"),
    (line(event="case", id="f__0", values_ok=True, rule_ok=True, problems=[]), "status"),
    (line(event="shutdown"), "unknown event"),
])
def test_malformed_export_events_are_refused(event, why):
    """Is every malformed or out-of-range export event refused with a reason?"""
    with pytest.raises(ProtocolError, match=why):
        read_event(event, KNOWN, "export", frozenset({"f__1"}))  # f__1 answers with an eager report


def test_each_case_is_answered_in_its_parts_form():
    """Is a case answered in the other form (a report for a case exported as an artifact, or an
    artifact for one called eagerly) refused, so that the harness never looks for what is not
    there? (A submission that forged one crashed the grader, which blamed the kit.)"""
    artifact, report = base64.b64encode(b"x").decode(), {"type": "tuple"}
    with pytest.raises(ProtocolError, match="a report for a case answered by an exported artifact"):
        read_event(line(event="case", id="f__0", status="ok", report={"type": "x"}), KNOWN, "export")
    with pytest.raises(ProtocolError, match="an artifact for a case called eagerly"):
        read_event(line(event="case", id="f__1", status="ok", artifact=artifact), KNOWN, "export", frozenset({"f__1"}))
    with pytest.raises(ProtocolError, match="report must be an object"):
        read_event(line(event="case", id="f__1", status="ok"), KNOWN, "export", frozenset({"f__1"}))
    assert read_event(line(event="case", id="f__0", status="ok", artifact=artifact), KNOWN, "export").artifact == b"x"
    assert read_event(line(event="case", id="f__1", status="ok", report=report), KNOWN, "export",
                      frozenset({"f__1"})).report is not None


def test_an_exception_while_tracing_is_read_from_its_flag_not_its_words():
    """Does a case that raised while tracing (the export worker's flag) name the visible check
    that raises it again, and a message that only begins with the same words not?"""
    from assignments.contracts import get_assignment
    from graders.harness import _jobs, export_failure

    job = _jobs(get_assignment("problem1"), b"secret")[0]
    said = "raised while tracing: ValueError (submission, line 3: x): no"
    flagged = read_event(line(event="case", id=job.id, status="error", message=said, while_tracing=True),
                         {job.id}, "export")
    assert export_failure(job, flagged).problems == [Problem("E002", f"{said}; to see it, run check("
                                                             f"{job.part.name}, case={job.case.label!r})", "run")]
    unflagged = read_event(line(event="case", id=job.id, status="error", message=said), {job.id}, "export")
    assert export_failure(job, unflagged).problems == [Problem("E002", said, "run")]


def test_an_export_worker_names_only_its_own_checks():
    """A failed export may say the function is missing (E001) or did not trace (E002), nothing
    else: a submission that forges another id (a rule it broke, or a grader's fault) is a
    protocol violation, not a verdict."""
    missing = read_event(line(event="case", id="f__0", status="error", message="not defined", rule="E001"),
                         KNOWN, "export")
    assert missing.rule == "E001"
    unreadable = read_event(line(event="case", id="f__0", status="error", message="not a notebook", rule="E004"),
                            KNOWN, "export")
    assert unreadable.rule == "E004"
    for forged in ("V005", "E005", "C001", "X999", 3):
        with pytest.raises(ProtocolError, match="rule must be one of E001, E002, E004"):
            read_event(line(event="case", id="f__0", status="error", message="m", rule=forged), KNOWN, "export")


def test_judge_events_are_checked_field_by_field():
    """Are a judge's flags booleans and its analysis a real program analysis?"""
    with pytest.raises(ProtocolError, match="true or false"):
        read_event(line(event="case", id="f__0", values_ok="yes", rule_ok=True, problems=[], ran=True), KNOWN, "judge")
    with pytest.raises(ProtocolError, match="ran must be true or false"):
        read_event(line(event="case", id="f__0", values_ok=True, rule_ok=True, problems=[]), KNOWN, "judge")
    with pytest.raises(ProtocolError, match="program analysis"):
        read_event(line(event="case", id="f__0", values_ok=True, rule_ok=True, problems=[], ran=True,
                        analysis={"collectives": 3}), KNOWN, "judge")
    long = {"rule": "C001", "kind": "communication", "message": "x" * 10_000}
    ok = read_event(line(event="case", id="f__1", values_ok=True, rule_ok=False, ran=True,
                         problems=[long] * 100), KNOWN, "judge")
    assert len(ok.problems) <= 12 and all(len(p.message) <= MAX_TEXT for p in ok.problems)
    assert {p.rule for p in ok.problems} == {"C001"}


@pytest.mark.parametrize("problem, why", [
    ("values wrong", "an object with rule, kind and message"),
    ({"rule": "Z999", "kind": "values", "message": "m"}, "not a rule or check the kit has"),
    ({"rule": "V005", "kind": "fine", "message": "m"}, "kind is not one of"),
    ({"rule": "V005", "kind": "hint", "message": "m"}, "a problem of V005 is of kind values, not hint"),
    ({"rule": "E001", "kind": "style", "message": "m"}, "a problem of E001 is of kind run, not style"),
    ({"rule": "V005", "kind": "values", "message": 7}, "message is not text"),
])
def test_a_judges_problems_are_typed_records_the_kit_knows(problem, why):
    """Is each problem a judge reports an object naming a rule or check the kit has, of a known
    kind, with a text message, and anything else a protocol violation?"""
    with pytest.raises(ProtocolError, match=why):
        read_event(line(event="case", id="f__1", values_ok=False, rule_ok=True, ran=True, problems=[problem]),
                   KNOWN, "judge")


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
RESOURCES = Resources(memory_bytes=2 * 2**30, tmp_bytes=2**24, processes=64, cpu_seconds=60)


def setup_for(ids, strikes=2) -> WorkerSetup:
    return WorkerSetup(RESOURCES, FAKE, None, "/", {i: i.split("__")[0] for i in ids}, strikes)


def fake_worker(script: str, ids: list[str], *, case=5.0, stall=5.0, budget=30.0, strikes=2):
    """Run a tiny Python 'worker' that prints the given events, under the real supervisor."""
    command = [sys.executable, "-c", script]
    deadlines = Deadlines(stall=stall, case=case, end=time.monotonic() + budget)
    return run_worker(command, lambda skip: json.dumps({"skip": skip}) + "\n", ids, kind="export",
                      deadlines=deadlines, setup=setup_for(ids, strikes))


PRELUDE = "import json, sys, os, time\nreq = json.loads(sys.stdin.readline())\n" \
          "def emit(**e):\n    print(json.dumps(e), flush=True)\n"


def test_a_forged_result_for_another_case_stops_the_worker():
    """Is a result for a case other than the one running a violation, blamed on that case?"""
    script = PRELUDE + ("if 'f__0' not in req['skip']:\n"
                        "    emit(event='start', id='f__0'); emit(event='case', id='f__1', status='ok', artifact='')\n"
                        "else:\n"
                        "    emit(event='start', id='f__1'); emit(event='case', id='f__1', status='error', message='m')\n"
                        "    emit(event='finished', timings={})\n")
    run = fake_worker(script, ["f__0", "f__1"])
    assert "not part of the grading protocol" in run.results["f__0"].message
    assert run.results["f__1"].message == "m"


def test_a_hanging_case_costs_two_strikes_then_the_function_is_skipped():
    """Does a function whose cases hang cost two case deadlines, its other cases skipped?"""
    script = PRELUDE + ("for i in range(5):\n"
                        "    cid = f'f__{i}'\n"
                        "    if cid in req['skip']: continue\n"
                        "    emit(event='start', id=cid); time.sleep(60)\n")
    started = time.monotonic()
    run = fake_worker(script, [f"f__{i}" for i in range(5)], case=0.5)
    assert time.monotonic() - started < 8
    assert "ran longer than 0.5 s" in run.results["f__0"].message
    assert "ran longer than 0.5 s" in run.results["f__1"].message
    for i in (2, 3, 4):
        assert "not run: 2 earlier cases of f already failed" in run.results[f"f__{i}"].message


def test_a_worker_killed_from_outside_is_retried_not_blamed(tmp_path):
    """Is a SIGKILL the supervisor did not send retried once, not blamed on the case?"""
    marker = str(tmp_path / "killed-once")
    script = PRELUDE + (f"if not os.path.exists({marker!r}):\n"
                        f"    open({marker!r}, 'w').close(); emit(event='start', id='f__0')\n"
                        "    import signal; os.kill(os.getpid(), signal.SIGKILL)\n"
                        "emit(event='start', id='f__0'); emit(event='case', id='f__0', status='error', message='ok')\n"
                        "emit(event='finished', timings={})\n")
    run = fake_worker(script, ["f__0"])
    assert run.results["f__0"].message == "ok"


def test_the_budget_bounds_everything():
    """Does a worker that keeps sending progress forever stop at the submission's budget?"""
    script = PRELUDE + "while True:\n    emit(event='progress'); time.sleep(0.1)\n"
    started = time.monotonic()
    run = fake_worker(script, ["f__0", "f__1"], budget=1.0)
    assert time.monotonic() - started < 5
    assert all("budget" in r.message for r in run.results.values())


JUDGE = ("import json, sys, time\n"
         "def emit(**e):\n    print(json.dumps(e), flush=True)\n"
         "emit(event='ready')\n"
         "header = json.loads(sys.stdin.readline())\n"
         "for line in sys.stdin:\n"
         "    job = json.loads(line)\n"
         "    emit(event='start', id=job['id'])\n"
         "{act}"
         "    emit(event='case', id=job['id'], values_ok=True, rule_ok=True, problems=[{{'rule': 'V005', 'kind': 'values', 'message': header['tag']}}], ran=True)\n"
         "emit(event='finished', timings={{}})\n")


def judge(act: str = "", ids=("f__0", "f__1", "g__0"), *, case=5.0, stall=5.0, budget=30.0,
          feed=None, started=None, board=None, worker=0, tag="judged"):
    """A fake judge under `run_stream`, fed the jobs `ids` one by one from another thread
    (`feed(board)` to feed it otherwise; none when it shares a `board` fed elsewhere)."""
    def default_feed(board):
        for i in ids:
            time.sleep(0.05)
            board.put(i, job_text({"id": i}))
        board.close()

    if board is None:
        board = JobBoard()
        threading.Thread(target=feed or default_feed, args=(board,), daemon=True).start()
    command = [sys.executable, "-c", JUDGE.format(act=act)]
    deadlines = Deadlines(stall=stall, case=case, end=time.monotonic() + budget)
    return run_stream(command, json.dumps({"tag": tag}) + "\n", board, kind="judge", worker=worker,
                      deadlines=deadlines, setup=setup_for(list(ids)), started=started)


def test_a_streamed_worker_judges_jobs_as_they_come():
    """Does a judge take its jobs one at a time as they are put, answering each, and end when
    the stream closes? Does a job put while it works on another wait for it, not get lost?"""
    run = judge()
    assert sorted(run.results) == ["f__0", "f__1", "g__0"]
    assert all(_said(r) == ["judged"] for r in run.results.values())
    assert [e.name for e in run.events] == ["finished"]


def test_a_streamed_worker_that_dies_is_replaced_with_the_jobs_it_held():
    """Does a judge that dies on a job cost that job only, a new judge taking the jobs the
    dead one held unanswered and the rest of the stream?"""
    act = "    if job['id'] == 'f__1': import os; os._exit(3)\n"
    run = judge(act, ids=("f__0", "f__1", "g__0", "g__1"))
    assert "exited with code 3" in run.results["f__1"].message
    assert {i: _said(r) for i, r in run.results.items() if i != "f__1"} == {
        "f__0": ["judged"], "g__0": ["judged"], "g__1": ["judged"]}


def test_struck_out_functions_are_not_run_even_when_their_jobs_come_later():
    """After two of a function's jobs hang, are its later jobs failed without being sent,
    while another function's jobs are judged?"""
    act = "    if job['id'].startswith('f'): time.sleep(60)\n"
    ids = ("f__0", "f__1", "f__2", "g__0", "f__3")
    run = judge(act, ids=ids, case=0.5)
    assert all("ran longer than 0.5 s" in run.results[i].message for i in ("f__0", "f__1"))
    assert all("not run: 2 earlier cases of f already failed" in run.results[i].message for i in ("f__2", "f__3"))
    assert _said(run.results["g__0"]) == ["judged"]


def test_a_judge_waiting_for_its_next_job_is_not_stalled():
    """Is a judge that waits longer than the stall deadline for jobs (the export is slow) left
    alone, and judged once the jobs come?"""
    def slow_feed(board):
        time.sleep(1.2)
        board.put("f__0", job_text({"id": "f__0"}))
        board.close()

    run = judge(ids=("f__0",), stall=0.5, feed=slow_feed)
    assert _said(run.results["f__0"]) == ["judged"]


def test_a_job_goes_to_the_first_free_judge_and_a_program_stays_with_its_judge():
    """Do two judges sharing a board each take a job only when ready and idle, so that the
    quick one judges most while the slow one holds one job at a time? Does a second job of a
    program go to the judge that took the program's first job (it compiled it)?"""
    board, runs = JobBoard(), {}
    ids = [f"f__{i}" for i in range(11)]
    slow = "    if header['tag'] == 'slow': time.sleep(1.0)\n"
    threads = [threading.Thread(target=lambda tag=tag, worker=worker: runs.setdefault(
        tag, judge(slow, ids=ids, board=board, worker=worker, tag=tag)), daemon=True)
        for worker, tag in enumerate(("slow", "quick"))]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # both ready
    for i in ids[:10]:
        board.put(i, job_text({"id": i}), program=i)
        time.sleep(0.02)  # each a chance for either judge
    time.sleep(0.3)
    board.put("f__10", job_text({"id": "f__10"}), program="f__0")  # f__0's program again
    board.close()
    for thread in threads:
        thread.join(30)
    judged_by = {i: tag for tag, run in runs.items() for i, r in run.results.items() if _said(r) == [tag]}
    assert sorted(judged_by) == sorted(ids)
    assert list(judged_by.values()).count("slow") <= 2
    assert judged_by["f__10"] == judged_by["f__0"]


def test_a_judge_that_never_starts_is_the_graders_failure():
    """Does a judge that ends twice before saying it is ready (it has run no student program:
    a broken installation) raise, instead of being restarted until the budget runs out?"""
    board = JobBoard()
    board.put("f__0", job_text({"id": "f__0"}))
    board.close()
    deadlines = Deadlines(stall=5, case=5, end=time.monotonic() + 30)
    started = time.monotonic()
    with pytest.raises(WorkerNeverReady, match="stopped twice before it was ready .*exited with code 3"):
        run_stream([sys.executable, "-c", "import sys; sys.exit(3)"], "{}\n", board, kind="judge",
                   deadlines=deadlines, setup=setup_for(["f__0"]))
    assert time.monotonic() - started < 10


def test_the_budget_fails_every_job_held_or_still_to_come():
    """When the budget runs out, do the jobs a judge holds and those still to come all fail
    saying so (the stream is drained, nothing waits forever)?"""
    act = "    time.sleep(60)\n"
    run = judge(act, ids=("f__0", "g__0", "h__0"), budget=0.8, case=30.0, stall=30.0)
    assert all("budget" in r.message for r in run.results.values()) and len(run.results) == 3


def test_a_worker_started_early_is_used_and_an_unneeded_one_stopped():
    """Is a judge started ahead (while the export runs) the one `run_stream` feeds, and does
    `abandon` end one that was never needed?"""
    command = [sys.executable, "-c", JUDGE.format(act="")]
    early = WorkerProcess(command, setup_for(["f__0"]))
    time.sleep(0.3)
    assert early.popen.poll() is None  # waiting for its header
    run = judge(ids=("f__0",), started=early)
    assert early.popen.returncode == 0 and _said(run.results["f__0"]) == ["judged"]
    unused = WorkerProcess([sys.executable, "-c", "import time; time.sleep(60)"], setup_for([]))
    unused.abandon()
    assert unused.popen.returncode is not None


def test_endings_say_whose_fault_and_what_to_do():
    """Does each way a worker ends read as what happened, with a memory-limit kill blamed on
    the submission and a SIGKILL from outside retried?"""
    deadlines = Deadlines(stall=7, case=3, end=0)
    memory = ending(Attempt(), -9, True, RESOURCES, deadlines)
    assert "more than its memory limit of 2 GiB" in memory.message and not memory.from_outside
    outside = ending(Attempt(), -9, False, RESOURCES, deadlines)
    assert outside.from_outside and "killed from outside" in outside.message
    assert "used up its 60 s of CPU time" in ending(Attempt(), 128 + 24, False, RESOURCES, deadlines).message
    assert "exited with code 1" in ending(Attempt(), 1, False, RESOURCES, deadlines).message


def test_cases_that_differ_only_in_values_are_traced_once():
    """Does the export worker trace one program per distinct abstract signature (problem2's
    routings differ only in their input values), sending its artifact for every such case,
    while a case with other shapes is traced again?"""
    from graders.sandboxed.export import export_part

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


def test_a_judge_threads_own_failure_fails_the_grading(monkeypatch):
    """Does an exception in a judge's thread (the graders' own: a fork failing, say) fail the
    grading loudly when the pool finishes, never score the unjudged cases as the student's?"""
    from contextlib import ExitStack

    from assignments.contracts import get_assignment
    from graders import harness
    from graders.settings import Limits

    def broken(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(harness, "run_stream", broken)
    monkeypatch.setattr(harness, "WorkerProcess", lambda command, setup: None)
    with ExitStack() as stack:
        pool = harness.JudgePool(get_assignment("problem1"), Limits(), setup_for([]), time.monotonic() + 30, 1, stack)
        pool.start()
        with pytest.raises(RuntimeError, match="a judge of the graders failed: .*Resource temporarily unavailable"):
            pool.finish()
