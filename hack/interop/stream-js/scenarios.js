// Scenarios a user of rabbitmq-stream-js-client (the Node stream client)
// runs, against the broker named by WARREN_STREAM_HOST and
// WARREN_STREAM_PORT. Each checks counts and contents; the script exits
// non-zero naming the scenario and what differed.
"use strict"

const rabbit = require("rabbitmq-stream-js-client")
const { Offset } = rabbit

const PARAMS = {
  hostname: process.env.WARREN_STREAM_HOST,
  port: Number(process.env.WARREN_STREAM_PORT),
  username: "guest",
  password: "guest",
  vhost: "/",
}
const STREAM = "interop-stream-js"
const SUPER = "interop-stream-js-super"
const N = 3000 // messages published with confirms
const TIMEOUT = 30000 // ms any one wait may take

class Differs extends Error {}

function check(cond, what) {
  if (!cond) throw new Differs(what)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function waitFor(cond, what) {
  const deadline = Date.now() + TIMEOUT
  while (!cond()) {
    if (Date.now() > deadline) throw new Differs(`timed out after ${TIMEOUT / 1000}s waiting for ${what()}`)
    await sleep(20)
  }
}

const body = (i) => Buffer.from(`message-${i}`)

function expectRange(got, first, last, what) {
  check(got.length === last - first, `${what}: ${got.length} messages, want ${last - first}`)
  got.forEach(([offset, text], k) => {
    const i = first + k
    check(offset === BigInt(i) && text === `message-${i}`, `${what}: message ${k} is ${text} at offset ${offset}, want message-${i} at ${i}`)
  })
}

async function publish(client, first, last) {
  const publisher = await client.declarePublisher({ stream: STREAM })
  const confirmed = new Set()
  const errors = []
  publisher.on("publish_confirm", (err, ids) => {
    if (err) errors.push(...ids)
    else ids.forEach((id) => confirmed.add(id))
  })
  const sent = []
  for (let i = first; i < last; i++) sent.push((await publisher.send(body(i))).publishingId)
  await publisher.flush()
  await waitFor(() => confirmed.size + errors.length >= last - first, () => `${last - first} confirms (${confirmed.size} arrived)`)
  check(errors.length === 0, `${errors.length} messages nacked`)
  check(sent.every((id) => confirmed.has(id)), "a sent publishing id was not confirmed")
  await publisher.close()
}

// consume subscribes from offset, waits for want messages (and a little
// more, to see extras) and returns [[offset, text]].
async function consume(client, offset, want) {
  const got = []
  const consumer = await client.declareConsumer({ stream: STREAM, offset }, (msg) => {
    got.push([msg.offset, msg.content.toString()])
  })
  await waitFor(() => got.length >= want, () => `${want} messages (${got.length} arrived)`)
  await sleep(300)
  await consumer.close()
  return got
}

async function publishConsume(client) {
  await client.createStream({ stream: STREAM })
  const stats = await client.streamStatsRequest(STREAM)
  check(stats !== undefined, "no statistics for the created stream")
  await publish(client, 0, N)

  expectRange(await consume(client, Offset.first(), N), 0, N, "from first")
  const at = 1234
  expectRange(await consume(client, Offset.offset(BigInt(at)), N - at), at, N, `from offset ${at}`)

  // next: only what is published after subscribing.
  const got = []
  const consumer = await client.declareConsumer({ stream: STREAM, offset: Offset.next() }, (msg) => {
    got.push([msg.offset, msg.content.toString()])
  })
  await sleep(300)
  check(got.length === 0, `next delivered ${got.length} old messages`)
  await publish(client, N, N + 10)
  await waitFor(() => got.length >= 10, () => `10 new messages from next (${got.length} arrived)`)
  await sleep(300)
  await consumer.close()
  expectRange(got, N, N + 10, "from next")
}

async function storedOffset(client) {
  const ref = "interop-app"
  let before
  try {
    before = await client.queryOffset({ reference: ref, stream: STREAM })
  } catch (e) {
    before = undefined
  }
  check(before === undefined, `query offset before any store: ${before}, want no offset`)
  const consumer = await client.declareConsumer({ stream: STREAM, offset: Offset.first(), consumerRef: ref }, () => {})
  for (const want of [2500n, 2600n]) {
    await consumer.storeOffset(want)
    // store offset has no response: the stored value shows up shortly.
    let last
    const deadline = Date.now() + TIMEOUT
    while (Date.now() < deadline) {
      last = await client.queryOffset({ reference: ref, stream: STREAM }).catch(() => undefined)
      if (last === want) break
      await sleep(50)
    }
    check(last === want, `query offset ${ref}: ${last}, want ${want}`)
  }
  await consumer.close()
  // A consumer restarting after its stored offset sees the rest.
  expectRange(await consume(client, Offset.offset(2601n), N + 10 - 2601), 2601, N + 10, "from the stored offset")
}

// Two consumers named alike with single active consumer: only the first
// gets messages, from the offset its update listener answers.
async function singleActiveConsumer(client) {
  const got = { 1: [], 2: [] }
  const updates = []
  const consumers = []
  for (const k of [1, 2]) {
    consumers.push(
      await client.declareConsumer(
        {
          stream: STREAM,
          offset: Offset.first(),
          singleActive: true,
          consumerRef: "interop-sac",
          consumerUpdateListener: async () => {
            updates.push(k)
            return Offset.first()
          },
        },
        (msg) => got[k].push([msg.offset, msg.content.toString()]),
      ),
    )
  }
  await waitFor(() => got[1].length + got[2].length >= N + 10, () => `${N + 10} messages for the active consumer`)
  await sleep(300)
  for (const c of consumers) await c.close()
  check(updates[0] === 1, `consumer updates went to consumers ${updates}, want the first first`)
  check(got[2].length === 0, `the inactive consumer got ${got[2].length} messages`)
  expectRange(got[1], 0, N + 10, "single active consumer")
}

// A super stream with partitions bound by keys a, b, c: the publisher
// routes by key (the broker's route command), the consumer reads every
// partition; each message is in the partition of its key.
async function superStream(client) {
  const keys = ["a", "b", "c"]
  const m = 300
  await client.createSuperStream({ streamName: SUPER }, keys)
  const partitions = await client.queryPartitions({ superStream: SUPER })
  check(JSON.stringify(partitions) === JSON.stringify(keys.map((k) => `${SUPER}-${k}`)), `partitions ${partitions}`)
  const publisher = await client.declareSuperStreamPublisher({ superStream: SUPER, routingStrategy: "key" }, (_, opts) => opts.applicationProperties.key)
  for (let i = 0; i < m; i++) await publisher.send(body(i), { applicationProperties: { key: keys[i % 3] } })

  const routed = {}
  const consumer = await client.declareSuperStreamConsumer({ superStream: SUPER, offset: Offset.first() }, (msg, c) => {
    ;(routed[c.streamName] ||= []).push(msg.content.toString())
  })
  const total = () => Object.values(routed).reduce((n, l) => n + l.length, 0)
  await waitFor(() => total() >= m, () => `${m} messages from the partitions (${total()} arrived)`)
  await sleep(300)
  await consumer.close()
  await publisher.close()
  keys.forEach((key, p) => {
    const want = []
    for (let i = p; i < m; i += 3) want.push(`message-${i}`)
    const got = routed[`${SUPER}-${key}`] || []
    check(JSON.stringify(got) === JSON.stringify(want), `partition ${SUPER}-${key}: ${got.length} messages ${got.slice(0, 3)}..., want ${want.length} ${want.slice(0, 3)}...`)
  })
  await client.deleteSuperStream({ streamName: SUPER })
  for (const key of keys) {
    const exists = await client.streamStatsRequest(`${SUPER}-${key}`).then(() => true, () => false)
    check(!exists, `partition ${SUPER}-${key} survives the super stream's deletion`)
  }
}

async function deleteStream(client) {
  await client.deleteStream({ stream: STREAM })
  const exists = await client.streamStatsRequest(STREAM).then(() => true, () => false)
  check(!exists, "the deleted stream still exists")
}

const SCENARIOS = [
  ["publish with confirms, consume from first / offset / next", publishConsume],
  ["stored offset", storedOffset],
  ["single active consumer", singleActiveConsumer],
  ["super stream", superStream],
  ["delete stream", deleteStream],
]

async function main() {
  let failed = 0
  let client
  try {
    client = await rabbit.connect(PARAMS)
  } catch (e) {
    console.error(`stream-js: FAIL connect: ${e && e.message}`)
    return 1
  }
  for (const [name, run] of SCENARIOS) {
    const start = Date.now()
    try {
      await Promise.race([run(client), sleep(120000).then(() => Promise.reject(new Differs("took over 120s")))])
      console.log(`stream-js: ok   ${name} (${((Date.now() - start) / 1000).toFixed(1)}s)`)
    } catch (e) {
      failed++
      console.error(`stream-js: FAIL ${name}: ${e && e.constructor.name}: ${e && e.message}`)
      if (name.startsWith("publish")) break // the rest build on this one
    }
  }
  try {
    await client.close()
    console.log("stream-js: ok   close")
  } catch (e) {
    failed++
    console.error(`stream-js: FAIL close: ${e && e.message}`)
  }
  return failed
}

// The client throws from its socket handlers on frames it does not expect
// (a close from the server, above all): name that as a failure too.
for (const event of ["uncaughtException", "unhandledRejection"]) {
  process.on(event, (e) => {
    console.error(`stream-js: FAIL ${event}: ${e && e.stack}`)
    process.exit(1)
  })
}

main().then(
  (failed) => process.exit(failed ? 1 : 0),
  (e) => {
    console.error(`stream-js: FAIL ${e && e.stack}`)
    process.exit(1)
  },
)
