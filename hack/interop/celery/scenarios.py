"""Celery against Warren: a worker (started by run.sh) consumes tasks from
the AMQP broker and returns results with the rpc:// backend. Each check
raises with what differed; the exit code is non-zero if any failed."""

import sys
import time
import traceback

import celery
from celery import group

from tasks import add, app, fail, slow_square

TIMEOUT = 30


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def wait_for_worker():
    # The worker answers a broadcast ping (fanout exchange, reply queue)
    # once it consumes.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=1.0)
        if replies:
            return
    raise AssertionError("no worker answered a ping within 60 s")


def round_trip():
    r = add.delay(2, 3)
    expect(r.get(timeout=TIMEOUT) == 5, f"add(2, 3) = {r.result!r}")
    expect(r.state == "SUCCESS", f"state {r.state}")
    r = add.apply_async((40, 2), countdown=0.5)
    expect(r.get(timeout=TIMEOUT) == 42, f"add(40, 2) with a countdown = {r.result!r}")


def failure():
    r = fail.delay()
    try:
        r.get(timeout=TIMEOUT)
        raise AssertionError("a failing task's get() did not raise")
    except ValueError as e:
        expect("on purpose" in str(e), f"the task's exception came back as {e!r}")
    expect(r.state == "FAILURE", f"state {r.state}")


def parallel():
    # Eight 0.2 s tasks on four worker processes, whose prefetch lets each
    # hold several unacknowledged (acks late): some run at the same time.
    n = 8
    got = group(slow_square.s(i) for i in range(n))().get(timeout=TIMEOUT)
    expect([r[0] for r in got] == [i * i for i in range(n)], f"slow_square results {got}")
    overlapping = [(a[1], b[1]) for a in got for b in got
                   if a[1] != b[1] and a[2] < b[3] and b[2] < a[3]]
    expect(overlapping, f"no two of {n} tasks ran at the same time: {got}")


def many_round_trips():
    results = [add.delay(i, 1) for i in range(20)]
    got = [r.get(timeout=TIMEOUT) for r in results]
    expect(got == [i + 1 for i in range(20)], f"add results {got}")


def a_group():
    got = group(add.s(i, i) for i in range(10))().get(timeout=TIMEOUT)
    expect(got == [2 * i for i in range(10)], f"group results {got}")


def a_chain():
    # (The rpc backend does not support chords: Celery refuses them itself.)
    r = (add.s(1, 2) | add.s(3) | add.s(4))()
    got = r.get(timeout=TIMEOUT)
    expect(got == 10, f"chain result {got!r}, want 10")


def main():
    wait_for_worker()
    scenarios = [round_trip, failure, parallel, many_round_trips, a_group, a_chain]
    failed = []
    for s in scenarios:
        start = time.monotonic()
        try:
            s()
            print(f"celery: ok   {s.__name__} ({time.monotonic() - start:.1f}s)")
        except Exception as e:
            failed.append(s.__name__)
            print(f"celery: FAIL {s.__name__}: {e!r}", file=sys.stderr)
            traceback.print_exc()
    if failed:
        print(f"celery: {len(failed)} of {len(scenarios)} scenarios failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"celery {celery.__version__}: {len(scenarios)} scenarios passed")


if __name__ == "__main__":
    main()
