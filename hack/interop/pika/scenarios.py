"""pika against Warren: what a pika user does, with a blocking and a select
connection. Each check raises with what differed; the exit code is non-zero
if any failed. WARREN_AMQP_URL names the broker."""

import os
import sys
import threading
import time
import traceback

import pika
import pika.exceptions

URL = os.environ["WARREN_AMQP_URL"]
REPLY_TO = "amq.rabbitmq.reply-to"


def params(name, heartbeat=None):
    p = pika.URLParameters(URL)
    p.client_properties = {"connection_name": name}
    if heartbeat is not None:
        p.heartbeat = heartbeat
    return p


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def blocking_declare_publish_consume():
    conn = pika.BlockingConnection(params("pika-blocking", heartbeat=10))
    ch = conn.channel()
    ch.exchange_declare("pika.x", "direct", durable=True)
    ch.exchange_declare("pika.fan", "fanout", durable=True)
    q = ch.queue_declare("pika.q", durable=True)
    expect(q.method.message_count == 0, f"fresh queue holds {q.method.message_count} messages")
    ch.queue_bind("pika.q", "pika.x", routing_key="k")
    # exchange to exchange: pika.x -k2-> pika.fan -> pika.q2
    ch.queue_declare("pika.q2", durable=True)
    ch.queue_bind("pika.q2", "pika.fan")
    ch.exchange_bind(destination="pika.fan", source="pika.x", routing_key="k2")

    ch.confirm_delivery()
    n = 50
    for i in range(n):
        # basic_publish raises NackError or UnroutableError in confirm mode.
        ch.basic_publish("pika.x", "k", f"m{i}".encode(),
                         pika.BasicProperties(delivery_mode=2, headers={"i": i}, content_type="text/plain"),
                         mandatory=True)
    ch.basic_publish("pika.x", "k2", b"via exchange binding", mandatory=True)

    # mandatory and unroutable: returned, which pika raises in confirm mode
    try:
        ch.basic_publish("pika.x", "nowhere", b"lost", mandatory=True)
        raise AssertionError("mandatory publish to an unroutable key was not returned")
    except pika.exceptions.UnroutableError as e:
        expect(len(e.messages) == 1 and e.messages[0].body == b"lost", f"returned {e.messages}")
        expect(e.messages[0].method.reply_code == 312, f"return code {e.messages[0].method.reply_code}, want 312")

    q = ch.queue_declare("pika.q", passive=True)
    expect(q.method.message_count == n, f"queue holds {q.method.message_count} after {n} confirmed publishes")
    q2 = ch.queue_declare("pika.q2", passive=True)
    expect(q2.method.message_count == 1, f"exchange-bound queue holds {q2.method.message_count}, want 1")

    # consume with prefetch and manual acks: never more than the prefetch unacked
    prefetch = 5
    ch.basic_qos(prefetch_count=prefetch)
    got, held = [], []
    for method, props, body in ch.consume("pika.q", inactivity_timeout=2):
        if method is None:
            break
        held.append(method.delivery_tag)
        got.append(body)
        expect(len(held) <= prefetch, f"{len(held)} unacked deliveries with prefetch {prefetch}")
        expect(props.headers == {"i": len(got) - 1}, f"headers {props.headers} on message {len(got) - 1}")
        expect(props.delivery_mode == 2 and props.content_type == "text/plain", f"properties {props}")
        if len(held) == prefetch or len(got) == n:
            ch.basic_ack(held[-1], multiple=True)
            held = []
        if len(got) == n:
            break
    ch.cancel()
    expect(got == [f"m{i}".encode() for i in range(n)], f"consumed {len(got)} messages in order? {got[:5]}...")

    # nack with requeue: the message comes back, redelivered
    ch.basic_publish("", "pika.q", b"again")
    method, _, body = ch.basic_get("pika.q")
    expect(body == b"again" and not method.redelivered, f"get: {body} redelivered={method.redelivered}")
    ch.basic_nack(method.delivery_tag, requeue=True)
    method, _, body = ch.basic_get("pika.q")
    expect(body == b"again" and method.redelivered, f"after nack: {body} redelivered={method and method.redelivered}")
    ch.basic_reject(method.delivery_tag, requeue=False)
    method, _, _ = ch.basic_get("pika.q")
    expect(method is None, "a rejected message came back")

    # heartbeats: idle well past the interval the broker asked for, still open
    conn2 = pika.BlockingConnection(params("pika-heartbeat", heartbeat=1))
    conn2.sleep(3.5)
    expect(conn2.is_open, "the connection with 1 s heartbeats did not survive 3.5 s idle")
    c2 = conn2.channel()
    c2.queue_declare("pika.q", passive=True)
    conn2.close()

    ch.queue_delete("pika.q2")
    ch.exchange_delete("pika.fan")
    conn.close()
    expect(conn.is_closed, "close left the connection open")


def rpc_server(ready, stop, errors):
    """Replies to requests on pika.rpc with the body upper-cased, to reply_to."""
    try:
        conn = pika.BlockingConnection(params("pika-rpc-server"))
        ch = conn.channel()
        ch.queue_declare("pika.rpc")
        ch.confirm_delivery()

        def on_request(ch, method, props, body):
            expect(props.reply_to.startswith(REPLY_TO + "."), f"request reply_to {props.reply_to!r}")
            ch.basic_publish("", props.reply_to, body.upper(),
                             pika.BasicProperties(correlation_id=props.correlation_id))
            ch.basic_ack(method.delivery_tag)

        ch.basic_consume("pika.rpc", on_request)
        ready.set()
        while not stop.is_set():
            conn.process_data_events(time_limit=0.1)
        conn.close()
    except Exception:
        errors.append(traceback.format_exc())
        ready.set()


def blocking_direct_reply_to():
    ready, stop, errors = threading.Event(), threading.Event(), []
    t = threading.Thread(target=rpc_server, args=(ready, stop, errors))
    t.start()
    try:
        ready.wait(10)
        expect(not errors, f"rpc server: {errors}")
        conn = pika.BlockingConnection(params("pika-rpc-client"))
        ch = conn.channel()
        replies = {}

        def on_reply(ch, method, props, body):
            replies[props.correlation_id] = body

        ch.basic_consume(REPLY_TO, on_reply, auto_ack=True)
        n = 10
        for i in range(n):
            ch.basic_publish("", "pika.rpc", f"req{i}".encode(),
                             pika.BasicProperties(reply_to=REPLY_TO, correlation_id=str(i)))
        deadline = time.monotonic() + 15
        while len(replies) < n and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        want = {str(i): f"REQ{i}".encode() for i in range(n)}
        expect(replies == want, f"direct reply-to replies {replies}, want {want}")
        conn.close()
    finally:
        stop.set()
        t.join(10)
    expect(not errors, f"rpc server: {errors}")


class SelectScenario:
    """The same user story on a SelectConnection (callbacks on the ioloop):
    declare, publish with confirms, consume with acks and prefetch, a
    direct reply-to round trip between two channels, a clean close."""

    N = 30

    def __init__(self):
        self.error = None
        self.acked = 0
        self.consumed = []
        self.reply = None
        self.closed_cleanly = False
        self.conn = pika.SelectConnection(params("pika-select", heartbeat=5),
                                          on_open_callback=self.on_open,
                                          on_open_error_callback=self.on_open_error,
                                          on_close_callback=self.on_close)

    def fail(self, what):
        if self.error is None:
            self.error = what
        if self.conn.is_open:
            self.conn.close()
        else:
            self.conn.ioloop.stop()

    def run(self):
        self.conn.ioloop.call_later(30, lambda: self.fail(
            f"timed out: {self.acked} confirms, {len(self.consumed)} consumed, reply {self.reply!r}"))
        self.conn.ioloop.start()
        if self.error:
            raise AssertionError(self.error)
        expect(self.closed_cleanly, "the select connection did not close cleanly")

    def on_open_error(self, conn, err):
        self.error = f"open failed: {err!r}"
        conn.ioloop.stop()

    def on_close(self, conn, reason):
        self.closed_cleanly = isinstance(reason, pika.exceptions.ConnectionClosedByClient)
        if not self.closed_cleanly and self.error is None:
            self.error = f"connection closed: {reason!r}"
        conn.ioloop.stop()

    def on_open(self, conn):
        conn.channel(on_open_callback=self.on_channel)

    def watch(self, ch):
        ch.add_on_close_callback(lambda c, reason: self.conn.is_open and self.fail(f"channel {c.channel_number} closed: {reason!r}"))

    def on_channel(self, ch):
        self.ch = ch
        self.watch(ch)
        ch.queue_declare("pika.select", durable=True, callback=lambda _: ch.confirm_delivery(self.on_confirm, callback=self.on_confirm_mode))

    def on_confirm_mode(self, _):
        for i in range(self.N):
            self.ch.basic_publish("", "pika.select", f"s{i}".encode(), pika.BasicProperties(delivery_mode=2))

    def on_confirm(self, frame):
        m = frame.method
        if isinstance(m, pika.spec.Basic.Nack):
            return self.fail(f"publish {m.delivery_tag} nacked")
        self.acked = m.delivery_tag if m.multiple else self.acked + 1
        if self.acked == self.N:
            self.ch.basic_qos(prefetch_count=4, callback=lambda _: self.ch.basic_consume("pika.select", self.on_message))

    def on_message(self, ch, method, props, body):
        self.consumed.append(body)
        ch.basic_ack(method.delivery_tag)
        if len(self.consumed) == self.N:
            want = [f"s{i}".encode() for i in range(self.N)]
            if self.consumed != want:
                return self.fail(f"consumed {self.consumed}, want {want}")
            self.conn.channel(on_open_callback=self.on_server_channel)

    # direct reply-to between two channels of this connection
    def on_server_channel(self, server):
        self.watch(server)
        def on_request(c, method, props, body):
            c.basic_publish("", props.reply_to, b"pong:" + body, pika.BasicProperties(correlation_id=props.correlation_id))
        server.queue_declare("pika.select.rpc", exclusive=True,
                             callback=lambda _: server.basic_consume("pika.select.rpc", on_request, auto_ack=True,
                                                                     callback=lambda _: self.conn.channel(on_open_callback=self.on_client_channel)))

    def on_client_channel(self, client):
        self.watch(client)
        def on_reply(c, method, props, body):
            self.reply = (props.correlation_id, body)
            if self.reply != ("c1", b"pong:ping"):
                return self.fail(f"select reply {self.reply}")
            self.conn.close()
        client.basic_consume(REPLY_TO, on_reply, auto_ack=True,
                             callback=lambda _: client.basic_publish("", "pika.select.rpc", b"ping",
                                                                     pika.BasicProperties(reply_to=REPLY_TO, correlation_id="c1")))


def select_connection():
    SelectScenario().run()
    conn = pika.BlockingConnection(params("pika-cleanup"))
    conn.channel().queue_delete("pika.select")
    conn.close()


def main():
    scenarios = [blocking_declare_publish_consume, blocking_direct_reply_to, select_connection]
    failed = []
    for s in scenarios:
        start = time.monotonic()
        try:
            s()
            print(f"pika: ok   {s.__name__} ({time.monotonic() - start:.1f}s)")
        except Exception as e:
            failed.append(s.__name__)
            print(f"pika: FAIL {s.__name__}: {e}", file=sys.stderr)
            traceback.print_exc()
    if failed:
        print(f"pika: {len(failed)} of {len(scenarios)} scenarios failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    print(f"pika {pika.__version__}: {len(scenarios)} scenarios passed")


if __name__ == "__main__":
    main()
