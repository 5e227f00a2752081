"""Scenarios a user of rstream runs, against the broker named by
WARREN_STREAM_HOST and WARREN_STREAM_PORT. Each checks counts and contents
and the script exits non-zero naming the scenario and what differed."""

import asyncio
import os
import sys
import time

import mmh3

from rstream import (
    AMQPMessage,
    Consumer,
    ConsumerOffsetSpecification,
    MessageContext,
    OffsetNotFound,
    OffsetSpecification,
    OffsetType,
    Producer,
    RouteType,
    SuperStreamConsumer,
    SuperStreamCreationOption,
    SuperStreamProducer,
    amqp_decoder,
)

HOST = os.environ["WARREN_STREAM_HOST"]
PORT = int(os.environ["WARREN_STREAM_PORT"])
AUTH = dict(username="guest", password="guest")
STREAM = "interop-rstream"
SUPER = "interop-rstream-super"
N = 3000  # messages published with confirms
TIMEOUT = 30  # seconds any one wait may take


class Differs(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Differs(what)


def body(i):
    return f"message-{i}".encode()


def text(msg):
    b = msg.body
    if isinstance(b, list):  # AMQP data sections
        b = b"".join(b)
    return bytes(b).decode()


async def wait_for(cond, what):
    deadline = time.monotonic() + TIMEOUT
    while not cond():
        if time.monotonic() > deadline:
            raise Differs(f"timed out after {TIMEOUT}s waiting for {what}")
        await asyncio.sleep(0.02)


async def consume(stream, spec, want, **subscribe_args):
    """Subscribes with spec, waits for want messages (and a little more, to
    see extras) and returns [(offset, text)]."""
    got = []

    async def on_message(msg, ctx: MessageContext):
        got.append((ctx.offset, text(msg)))

    async with Consumer(HOST, PORT, **AUTH) as consumer:
        await consumer.subscribe(stream, on_message, decoder=amqp_decoder, offset_specification=spec, **subscribe_args)
        await wait_for(lambda: len(got) >= want, f"{want} messages from {stream} ({len(got)} arrived)")
        await asyncio.sleep(0.3)
    return got


def expect_range(got, first, last, what):
    check(len(got) == last - first, f"{what}: {len(got)} messages, want {last - first}")
    for k, (offset, t) in enumerate(got):
        i = first + k
        check(offset == i and t == f"message-{i}", f"{what}: message {k} is {t!r} at offset {offset}, want message-{i} at {i}")


async def publish(producer, stream, first, last):
    confirmed, failed = [], []

    def on_confirm(status):
        (confirmed if status.is_confirmed else failed).append(status.message_id)

    batch = [AMQPMessage(body=body(i)) for i in range(first, last)]
    for k in range(0, len(batch), 500):
        await producer.send_batch(stream, batch[k : k + 500], on_publish_confirm=on_confirm)
    await wait_for(lambda: len(confirmed) + len(failed) >= last - first, f"{last - first} confirms ({len(confirmed)} arrived)")
    check(not failed, f"{len(failed)} messages nacked")
    check(len(set(confirmed)) == last - first, f"{len(set(confirmed))} distinct publishing ids confirmed, want {last - first}")


async def scenario_publish_consume():
    async with Producer(HOST, PORT, **AUTH) as producer:
        await producer.create_stream(STREAM)
        check(await producer.stream_exists(STREAM), "the created stream does not exist")
        await publish(producer, STREAM, 0, N)

    got = await consume(STREAM, ConsumerOffsetSpecification(OffsetType.FIRST), N)
    expect_range(got, 0, N, "from first")

    at = 1234
    got = await consume(STREAM, ConsumerOffsetSpecification(OffsetType.OFFSET, at), N - at)
    expect_range(got, at, N, f"from offset {at}")

    # next: only what is published after subscribing.
    got = []

    async def on_message(msg, ctx):
        got.append((ctx.offset, text(msg)))

    async with Consumer(HOST, PORT, **AUTH) as consumer:
        await consumer.subscribe(STREAM, on_message, decoder=amqp_decoder, offset_specification=ConsumerOffsetSpecification(OffsetType.NEXT))
        await asyncio.sleep(0.3)
        check(not got, f"next delivered {len(got)} old messages")
        async with Producer(HOST, PORT, **AUTH) as producer:
            await publish(producer, STREAM, N, N + 10)
        await wait_for(lambda: len(got) >= 10, f"10 new messages from next ({len(got)} arrived)")
        await asyncio.sleep(0.3)
    expect_range(got, N, N + 10, "from next")


async def scenario_stored_offset():
    async with Consumer(HOST, PORT, **AUTH) as consumer:
        try:
            off = await consumer.query_offset(STREAM, "interop-app")
            raise Differs(f"query offset before any store: {off}, want no offset")
        except OffsetNotFound:
            pass
        await consumer.store_offset(STREAM, "interop-app", 2500)
        await wait_for_offset(consumer, "interop-app", 2500)
        await consumer.store_offset(STREAM, "interop-app", 2600)
        await wait_for_offset(consumer, "interop-app", 2600)
    # A consumer restarting from its stored offset + 1 sees the rest.
    got = await consume(STREAM, ConsumerOffsetSpecification(OffsetType.OFFSET, 2601), N + 10 - 2601)
    expect_range(got, 2601, N + 10, "from the stored offset")


async def wait_for_offset(consumer, ref, want):
    # store offset has no response: the stored value shows up shortly.
    last = None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            last = await consumer.query_offset(STREAM, ref)
            if last == want:
                return
        except OffsetNotFound:
            pass
        await asyncio.sleep(0.05)
    raise Differs(f"query offset {ref}: {last}, want {want}")


async def scenario_single_active_consumer():
    """Two consumers named alike with single-active-consumer: only the
    first gets messages, from the offset its update listener answers."""
    got = {1: [], 2: []}
    updates = []

    def on(k):
        async def on_message(msg, ctx):
            got[k].append((ctx.offset, text(msg)))

        return on_message

    async def on_update(active, ctx):
        updates.append(active)
        return OffsetSpecification(OffsetType.FIRST, 0)

    props = {"single-active-consumer": "true", "name": "interop-sac"}
    async with Consumer(HOST, PORT, **AUTH) as first, Consumer(HOST, PORT, **AUTH) as second:
        for k, consumer in ((1, first), (2, second)):
            await consumer.subscribe(
                STREAM, on(k), decoder=amqp_decoder, properties=props, subscriber_name="interop-sac",
                consumer_update_listener=on_update,
                offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST))
        await wait_for(lambda: len(got[1]) + len(got[2]) >= N + 10, f"{N + 10} messages for the active consumer")
        await asyncio.sleep(0.3)
    check(updates[:1] == [True], f"consumer updates {updates}, want the first active")
    check(not got[2], f"the inactive consumer got {len(got[2])} messages")
    expect_range(got[1], 0, N + 10, "single active consumer")


def hash_partition(key, n):
    """The partition index rstream's hash routing picks (as the Java and
    Go clients: murmur3 of the key, modulo the partition count)."""
    h = mmh3.hash_bytes(bytes(key, "UTF-16"), 104729)
    return int.from_bytes(h, "little", signed=False) % n


async def scenario_super_stream():
    """A super stream of 3 partitions: the producer routes by hash over the
    partitions in the order the broker lists them, the consumer reads every
    partition; each message is in the partition its key hashes to."""
    m = 300
    routed = {}

    async def routing_key(msg):
        return msg.application_properties["key"]

    async with SuperStreamProducer(
        HOST, PORT, **AUTH, super_stream=SUPER, routing=RouteType.Hash, routing_extractor=routing_key,
        super_stream_creation_option=SuperStreamCreationOption(n_partitions=3),
    ) as producer:
        confirmed = []
        for i in range(m):
            msg = AMQPMessage(body=body(i), application_properties={"key": f"key-{i}"})
            await producer.send(msg, on_publish_confirm=lambda s: confirmed.append(s.is_confirmed))
        await wait_for(lambda: len(confirmed) >= m, f"{m} super stream confirms ({len(confirmed)} arrived)")
        check(all(confirmed), "super stream messages nacked")

    async def on_message(msg, ctx):
        routed.setdefault(ctx.stream, []).append(text(msg))

    async with SuperStreamConsumer(HOST, PORT, **AUTH, super_stream=SUPER) as consumer:
        await consumer.subscribe(on_message, decoder=amqp_decoder, offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST))
        await wait_for(lambda: sum(map(len, routed.values())) >= m, f"{m} messages from the partitions")
        await asyncio.sleep(0.3)
    for p in range(3):
        want = [f"message-{i}" for i in range(m) if hash_partition(f"key-{i}", 3) == p]
        got = routed.get(f"{SUPER}-{p}", [])
        check(got == want, f"partition {SUPER}-{p}: {len(got)} messages {got[:3]}..., want {len(want)} {want[:3]}...")
    check(len(routed) == 3, f"messages came from {sorted(routed)}")

    async with SuperStreamProducer(HOST, PORT, **AUTH, super_stream=SUPER, routing_extractor=routing_key) as producer:
        await producer.delete_super_stream(SUPER)
    async with Producer(HOST, PORT, **AUTH) as producer:
        for p in range(3):
            check(not await producer.stream_exists(f"{SUPER}-{p}"), f"partition {SUPER}-{p} survives the super stream's deletion")


async def scenario_delete():
    async with Producer(HOST, PORT, **AUTH) as producer:
        await producer.delete_stream(STREAM)
        check(not await producer.stream_exists(STREAM), "the deleted stream still exists")


SCENARIOS = [
    ("publish with confirms, consume from first / offset / next", scenario_publish_consume),
    ("stored offset", scenario_stored_offset),
    ("single active consumer", scenario_single_active_consumer),
    ("super stream", scenario_super_stream),
    ("delete stream and close", scenario_delete),
]


async def main():
    failed = 0
    for name, run in SCENARIOS:
        start = time.monotonic()
        try:
            await asyncio.wait_for(run(), 120)
            print(f"rstream: ok   {name} ({time.monotonic() - start:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported by scenario
            failed += 1
            print(f"rstream: FAIL {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            if failed and name.startswith("publish"):
                break  # the rest build on this one
    return failed


if __name__ == "__main__":
    sys.exit(1 if asyncio.run(main()) else 0)
