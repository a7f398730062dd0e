"""Route 7: a time bomb. It loads for just under the cell limit, then defeats the per-case
alarm in every case (ignoring SIGALRM and catching the timeout), hoping to cost the grader a
full timeout per case, and per restart."""
import signal
import time

time.sleep(1.5)  # the test's cell limit is 2 s


def roll_diff(A, *, mesh, shift):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        try:
            time.sleep(1)
        except BaseException:
            pass
