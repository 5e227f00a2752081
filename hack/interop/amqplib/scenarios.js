// amqplib against Warren: what an amqplib user does (promise API). Each
// scenario throws with what differed; the exit code is non-zero if any
// failed. WARREN_AMQP_URL names the broker.
'use strict';

const amqp = require('amqplib');
const assert = require('node:assert/strict');

const URL = process.env.WARREN_AMQP_URL;
const REPLY_TO = 'amq.rabbitmq.reply-to';

// connect opens a connection whose errors fail the scenario that awaits
// the operation (a channel's error closes it; the awaited call rejects)
// instead of crashing the process as an unhandled 'error' event.
async function connect(name, heartbeat = 10) {
  const conn = await amqp.connect(URL + (URL.includes('?') ? '&' : '?') + `heartbeat=${heartbeat}`, {
    clientProperties: { connection_name: name },
  });
  conn.on('error', (err) => console.error(`amqplib: ${name}: connection error: ${err.message}`));
  const createChannel = conn.createChannel.bind(conn);
  const createConfirmChannel = conn.createConfirmChannel.bind(conn);
  const watch = (ch) => { ch.on('error', (err) => console.error(`amqplib: ${name}: channel error: ${err.message}`)); return ch; };
  conn.createChannel = async () => watch(await createChannel());
  conn.createConfirmChannel = async () => watch(await createConfirmChannel());
  return conn;
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function declarePublishConsume() {
  const conn = await connect('amqplib-main');
  const ch = await conn.createConfirmChannel();
  await ch.assertExchange('amqplib.x', 'topic', { durable: true });
  await ch.assertExchange('amqplib.fan', 'fanout', { durable: false, autoDelete: false });
  const q = await ch.assertQueue('amqplib.q', { durable: true });
  assert.equal(q.messageCount, 0, 'a fresh queue holds messages');
  await ch.bindQueue('amqplib.q', 'amqplib.x', 'orders.*');
  await ch.assertQueue('amqplib.q2', { durable: false });
  await ch.bindQueue('amqplib.q2', 'amqplib.fan', '');
  await ch.bindExchange('amqplib.fan', 'amqplib.x', 'audit.#');

  // publish with confirms
  const n = 40;
  for (let i = 0; i < n; i++) {
    ch.publish('amqplib.x', 'orders.new', Buffer.from(`o${i}`), { persistent: true, headers: { i }, contentType: 'text/plain' });
  }
  ch.publish('amqplib.x', 'audit.log.x', Buffer.from('via exchange binding'));
  await withTimeout(ch.waitForConfirms(), 10000, 'confirms');

  // mandatory and unroutable: basic.return, then the confirm
  const returned = new Promise((resolve) => ch.once('return', resolve));
  await new Promise((resolve, reject) => ch.publish('amqplib.x', 'nowhere', Buffer.from('lost'), { mandatory: true },
    (err) => (err ? reject(new Error('unroutable publish nacked')) : resolve())));
  const ret = await withTimeout(returned, 5000, 'basic.return');
  assert.equal(ret.fields.replyCode, 312, 'return code');
  assert.equal(ret.content.toString(), 'lost', 'returned body');

  assert.equal((await ch.checkQueue('amqplib.q')).messageCount, n, 'messages in amqplib.q after confirms');
  assert.equal((await ch.checkQueue('amqplib.q2')).messageCount, 1, 'messages in the exchange-bound queue');

  // consume with prefetch and acks: never more than the prefetch unacked
  const prefetch = 5;
  await ch.prefetch(prefetch);
  const got = [];
  let held = [];
  let tooMany = null;
  const done = new Promise((resolve) => {
    ch.consume('amqplib.q', (msg) => {
      held.push(msg);
      got.push(msg);
      if (held.length > prefetch) tooMany = `${held.length} unacked with prefetch ${prefetch}`;
      if (held.length === prefetch || got.length === n) {
        ch.ack(held[held.length - 1], true);
        held = [];
      }
      if (got.length === n) resolve();
    }, { noAck: false, consumerTag: 'amqplib-consumer' });
  });
  await withTimeout(done, 15000, `consume ${n} (got ${got.length})`);
  await ch.cancel('amqplib-consumer');
  assert.equal(tooMany, null, tooMany);
  assert.deepEqual(got.map((m) => m.content.toString()), Array.from({ length: n }, (_, i) => `o${i}`), 'consumed bodies in order');
  got.forEach((m, i) => {
    assert.equal(m.properties.headers.i, i, `header i of message ${i}`);
    assert.equal(m.properties.deliveryMode, 2, 'delivery mode');
    assert.equal(m.fields.routingKey, 'orders.new', 'routing key');
    assert.equal(m.fields.consumerTag, 'amqplib-consumer', 'consumer tag');
  });

  // nack with requeue: it comes back redelivered
  ch.sendToQueue('amqplib.q', Buffer.from('again'));
  await ch.waitForConfirms();
  let m = await ch.get('amqplib.q');
  assert.ok(m && m.content.toString() === 'again' && !m.fields.redelivered, 'basic.get of a fresh message');
  ch.nack(m, false, true);
  m = await ch.get('amqplib.q');
  assert.ok(m && m.content.toString() === 'again' && m.fields.redelivered, 'the nacked message comes back redelivered');
  ch.nack(m, false, false);
  assert.equal(await ch.get('amqplib.q'), false, 'a message nacked without requeue came back');

  await ch.deleteQueue('amqplib.q2');
  await ch.deleteExchange('amqplib.fan');
  await ch.close();
  await conn.close();
}

async function directReplyTo() {
  const serverConn = await connect('amqplib-rpc-server');
  const server = await serverConn.createChannel();
  await server.assertQueue('amqplib.rpc', { durable: false });
  const badReplyTo = [];
  await server.consume('amqplib.rpc', (msg) => {
    if (msg === null) return; // cancelled: the queue is deleted at the end
    if (!msg.properties.replyTo.startsWith(REPLY_TO + '.')) badReplyTo.push(msg.properties.replyTo);
    server.sendToQueue(msg.properties.replyTo, Buffer.from(msg.content.toString().toUpperCase()),
      { correlationId: msg.properties.correlationId });
    server.ack(msg);
  });

  const clientConn = await connect('amqplib-rpc-client');
  const client = await clientConn.createChannel();
  const replies = new Map();
  const n = 10;
  const all = new Promise((resolve) => {
    client.consume(REPLY_TO, (msg) => {
      replies.set(msg.properties.correlationId, msg.content.toString());
      if (replies.size === n) resolve();
    }, { noAck: true });
  });
  // consume-ok came before the publishes: the reply consumer exists.
  await client.checkQueue(REPLY_TO);
  for (let i = 0; i < n; i++) {
    client.sendToQueue('amqplib.rpc', Buffer.from(`req${i}`), { replyTo: REPLY_TO, correlationId: String(i) });
  }
  await withTimeout(all, 10000, `replies (got ${replies.size})`);
  assert.deepEqual(badReplyTo, [], 'requests whose reply_to is not a reply name');
  for (let i = 0; i < n; i++) assert.equal(replies.get(String(i)), `REQ${i}`, `reply ${i}`);
  await clientConn.close();
  await server.deleteQueue('amqplib.rpc');
  await serverConn.close();
}

async function heartbeatsAndClose() {
  const conn = await connect('amqplib-heartbeat', 1);
  let closed = null;
  conn.on('close', (err) => { closed = err || 'closed'; });
  conn.on('error', (err) => { closed = err; });
  await sleep(3500);
  assert.equal(closed, null, `the connection with 1 s heartbeats closed while idle: ${closed}`);
  const ch = await conn.createChannel();
  await ch.checkQueue('amqplib.q');
  await conn.close();
  assert.equal(closed, 'closed', 'a clean close');
}

async function main() {
  const scenarios = [declarePublishConsume, directReplyTo, heartbeatsAndClose];
  const failed = [];
  for (const s of scenarios) {
    const start = Date.now();
    try {
      await withTimeout(s(), 30000, s.name);
      console.log(`amqplib: ok   ${s.name} (${((Date.now() - start) / 1000).toFixed(1)}s)`);
    } catch (e) {
      failed.push(s.name);
      console.error(`amqplib: FAIL ${s.name}: ${e.stack || e}`);
    }
  }
  const version = process.env.AMQPLIB_VERSION;
  if (failed.length) {
    console.error(`amqplib: ${failed.length} of ${scenarios.length} scenarios failed: ${failed.join(', ')}`);
    process.exit(1);
  }
  console.log(`amqplib ${version}: ${scenarios.length} scenarios passed`);
  process.exit(0);
}

main();
