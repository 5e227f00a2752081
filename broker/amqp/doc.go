// Package amqp is Warren's AMQP 0.9.1 server: connection negotiation, channels
// and the mapping of protocol methods onto vhosts, exchanges and queues. The
// wire codec lives in the wire subpackage and knows nothing of this one.
//
// Goroutines per connection: a reader that decodes frames and runs every
// channel's methods in order, and a writer that drains the connection's output
// buffer to the socket, flushing when the buffer runs dry rather than per
// message. Queue goroutines write deliveries straight into that buffer (and
// so does a reader whose lone publish an idle classic queue takes on the
// reader's goroutine: queue.InlinePublisher). Confirms a channel gives at
// enqueue (no fsync due, no queue that may refuse) go out once every queue
// has the message, before its deliveries: a basic.get that follows a
// confirm finds the message, on any connection. On
// plain TCP the reader reads, and small batches are written inline, through
// sockio; while a consumer waits for the client's ack (its prefetch used up)
// the reader busy-polls the socket for it briefly (Config.BusyPoll) before it
// sleeps, so the consumer's next batch leaves without a thread wake-up.
//
// The output is bounded (conn_write.go): queues stop delivering to a
// connection whose buffer is over 1 MiB, and a reader whose connection
// holds more than Config.OutputBufferLimit bytes for its socket (default
// 4 MiB: confirms, basic.return with bodies, replies) stops reading the
// client's frames until the writer has drained half of it, so a client
// that publishes without reading is pushed back by TCP; if the client
// takes no output for two heartbeat intervals meanwhile, the connection
// is closed. The writer never waits on the reader, so a client blocked
// writing to us can always read.
//
// Lock order: replyConsumer.mu (direct reply-to), then channel.mu
// (delivery tags and unacked messages), then channel.confirmMu (publisher
// confirms), then conn.outMu (output buffer). Server.replies.mu is taken
// alone.
// The reader never waits on a queue, except Throttle when a queue's inbox is
// over its high-water mark (flow control), and tx.commit, which waits for the
// transaction's messages to be confirmed.
//
// Permissions are RabbitMQ's: configure, write and read patterns checked
// per method on the resource it names; besides, creating a queue with a
// dead-letter exchange or an exchange with an alternate exchange needs read
// on it and write on that exchange, a server-named queue's generated name
// needs configure, and a publish's user_id property must name the
// connection's user (unless it is tagged impersonator), else 406.
//
// Direct reply-to is RabbitMQ's (directreply.go): a channel's no-ack
// consumer on the pseudo-queue amq.rabbitmq.reply-to, requests' reply_to
// rewritten to the channel's unguessable reply name, replies published to
// that name on the default exchange written straight to the consumer (not
// stored, beyond prefetch; dropped if its connection holds more than
// OutputBufferLimit, unroutable once the channel is gone). Ordinary
// publishes pay a look at their property flags (no reply_to) and one
// compare (not the default exchange, or not the prefix) for it.
//
// What RabbitMQ does not implement is refused as RabbitMQ refuses it: a
// client's channel.flow active=false and basic.publish immediate=true close
// the connection with 540 NOT_IMPLEMENTED (channel.flow active=true is
// answered flow-ok and changes nothing; prefetch is what holds deliveries).
//
// Protocol errors are *Error values: channel errors close one channel, the
// others the connection, each with RabbitMQ's reply code and text. A malformed
// frame closes only its own connection and never panics the process; frame
// errors during the handshake get a connection.close too. The read buffer is
// 4 KiB during the handshake (frame max 4096 before tune), 64 KiB after, so
// an unauthenticated connection holds a few KiB of heap. A message body is
// allocated as its frames arrive, never ahead of them (appendBody): a content
// header declares a size (refused with 406 above max_message_size, compared
// unsigned) but costs nothing by itself. Headers nested deeper than the codec
// decodes are refused at publish (406). A panic on a connection's reader,
// which would be a bug, is recovered, logged at error and ends only that
// connection.
//
// Each channel counts its messages for the HTTP API's message_stats
// (ChannelInfo.Stats) and the exchanges it publishes to theirs
// (Server.ExchangeStats): deliveries, redeliveries and acks under ch.mu,
// which those paths hold already; confirms under the confirm tracker's
// mutex; publishes, returns and drops by the reader, added to the
// channel's and the exchange's counters once per read batch.
// Server.Consumers lists the consumers (conn.chMu, then ch.mu).
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package amqp
