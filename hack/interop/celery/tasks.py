"""The Celery app the interop worker runs: the broker from WARREN_AMQP_URL,
results over AMQP with the rpc backend."""

import os
import time

from celery import Celery

app = Celery("warren_interop", broker=os.environ["WARREN_AMQP_URL"], backend="rpc://")
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=4,
    broker_connection_retry_on_startup=True,
    result_expires=300,
)


@app.task
def add(x, y):
    return x + y


@app.task
def slow_square(x):
    """x*x after 0.2 s, with the worker process and when it ran."""
    start = time.time()
    time.sleep(0.2)
    return [x * x, os.getpid(), start, time.time()]


@app.task
def fail():
    raise ValueError("task failed on purpose")
