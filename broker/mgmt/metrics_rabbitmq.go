package mgmt

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// The rabbitmq_* metric families of RabbitMQ's rabbitmq_prometheus plugin,
// with its names, types, labels and meaning, so RabbitMQ's Grafana
// dashboards and alerts work unchanged. Three endpoints, as RabbitMQ's:
//
//   - /metrics: node totals; queue metrics summed over all queues
//     (rabbitmq_identity_info{rabbitmq_endpoint="aggregated"}).
//   - /metrics/per-object: the same with one series per queue
//     (labels vhost, queue) and rabbitmq_queue_info.
//   - /metrics/detailed?family=...&vhost=...: only the families asked
//     for, named rabbitmq_detailed_*, optionally for some vhosts.
//
// Everything is read at scrape time from the broker's counters, so the
// hot paths pay nothing for it.

// rabbitVersion is the RabbitMQ version Warren reports where a RabbitMQ
// version is expected (rabbitmq_build_info, the HTTP API's overview).
const rabbitVersion = "3.13.0"

// Queue families of /metrics/detailed (RabbitMQ's names).
const (
	familyQueueCoarse   = "queue_coarse_metrics"
	familyQueueConsumer = "queue_consumer_count"
	familyQueue         = "queue_metrics"
	familyChurn         = "connection_churn_metrics"
	familyNodeCoarse    = "node_coarse_metrics"
	familyNode          = "node_metrics"
)

// rabbitCollector is an unchecked collector: its families depend on the
// endpoint and the query.
type rabbitCollector struct {
	b        Broker
	endpoint string // aggregated, per-object, detailed
	// detailed only: the families asked for and the vhosts (nil: all).
	families map[string]bool
	vhosts   map[string]bool
}

func (c *rabbitCollector) Describe(chan<- *prometheus.Desc) {}

// emitter writes const metrics.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) emit(t prometheus.ValueType, name, help string, v float64, labels ...string) {
	var names, values []string
	for i := 0; i+1 < len(labels); i += 2 {
		names, values = append(names, labels[i]), append(values, labels[i+1])
	}
	e.ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, names, nil), t, v, values...)
}

func (e emitter) counter(name, help string, v uint64, labels ...string) {
	e.emit(prometheus.CounterValue, name, help, float64(v), labels...)
}

func (e emitter) gauge(name, help string, v float64, labels ...string) {
	e.emit(prometheus.GaugeValue, name, help, v, labels...)
}

func (c *rabbitCollector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch}
	c.identity(e)
	if c.endpoint == "detailed" {
		const prefix = "rabbitmq_detailed_"
		if c.families[familyChurn] {
			c.churn(e, prefix)
		}
		if c.families[familyNodeCoarse] || c.families[familyNode] {
			c.node(e, prefix)
		}
		c.queues(e, prefix, true)
		return
	}
	c.global(e)
	c.churn(e, "rabbitmq_")
	c.totals(e)
	c.node(e, "rabbitmq_")
	c.alarms(e)
	c.messageSizes(e)
	c.queues(e, "rabbitmq_", c.endpoint == "per-object")
}

// identity is rabbitmq_build_info and rabbitmq_identity_info, the series
// every dashboard panel joins on.
func (c *rabbitCollector) identity(e emitter) {
	e.emit(prometheus.UntypedValue, "rabbitmq_build_info", "RabbitMQ-compatible version and runtime info (erlang_version is Go's).", 1,
		"rabbitmq_version", rabbitVersion, "product_name", "Warren", "product_version", c.b.Version(),
		"prometheus_plugin_version", c.b.Version(), "prometheus_client_version", "client_golang", "erlang_version", runtime.Version())
	e.emit(prometheus.UntypedValue, "rabbitmq_identity_info", "Node and cluster identity info.", 1,
		"rabbitmq_node", c.b.NodeName(), "rabbitmq_cluster", c.b.NodeName(), // the cluster name, as GET /api/cluster-name says
		"rabbitmq_cluster_permanent_id", c.b.ClusterID(), "rabbitmq_endpoint", c.endpoint)
}

// global is rabbitmq_global_*: message counters by protocol, and the
// stream protocol's error counters.
func (c *rabbitCollector) global(e emitter) {
	const p = "rabbitmq_global_"
	a := c.b.Counters()
	s := c.b.StreamCounters()
	amqpPublishers, amqpConsumers := 0, 0
	for _, ci := range c.b.Channels() {
		if ci.Publisher {
			amqpPublishers++
		}
		amqpConsumers += ci.Consumers
	}
	_, streamPublishers, streamConsumers := c.b.StreamClients()
	// Counters of the publishing side, by protocol.
	for _, m := range []struct {
		name, help   string
		amqp, stream uint64
	}{
		{"messages_received_total", "Messages received from publishers.", a.Published.Load(), s.Published.Load()},
		{"messages_received_confirm_total", "Messages received from publishers that expect confirms.", a.ReceivedConfirm.Load(), s.Published.Load()},
		{"messages_routed_total", "Messages routed to queues or streams.", a.Routed(), minus(s.Published.Load(), s.Duplicates.Load())},
		{"messages_unroutable_dropped_total", "Non-mandatory messages dropped as unroutable.", a.UnroutableDropped(), 0},
		{"messages_unroutable_returned_total", "Mandatory messages returned to the publisher as unroutable.", a.Returned.Load(), 0},
		{"messages_confirmed_total", "Messages confirmed to publishers.", a.Confirmed.Load(), s.Confirmed.Load()},
	} {
		e.counter(p+m.name, m.help, m.amqp, "protocol", "amqp091")
		e.counter(p+m.name, m.help, m.stream, "protocol", "stream")
	}
	// Counters of the consuming side, by protocol and queue type: AMQP
	// from every type, the stream protocol from streams.
	for qt := range amqp.NumQueueTypes {
		d := &a.ByQueueType[qt]
		var streamDelivered uint64
		if qt == amqp.QueueTypeStream {
			streamDelivered = s.Delivered.Load()
		}
		for _, m := range []struct {
			name, help   string
			amqp, stream uint64
		}{
			{"messages_delivered_total", "Messages delivered to consumers.", d.Delivered(), streamDelivered},
			{"messages_delivered_consume_manual_ack_total", "Messages delivered to consumers with manual acknowledgement.", d.ConsumeManualAck.Load(), 0},
			{"messages_delivered_consume_auto_ack_total", "Messages delivered to consumers with automatic acknowledgement.", d.ConsumeAutoAck.Load(), 0},
			{"messages_delivered_get_manual_ack_total", "Messages delivered by basic.get with manual acknowledgement.", d.GetManualAck.Load(), 0},
			{"messages_delivered_get_auto_ack_total", "Messages delivered by basic.get with automatic acknowledgement.", d.GetAutoAck.Load(), 0},
			{"messages_get_empty_total", "basic.get operations that found no message.", d.GetEmpty.Load(), 0},
			{"messages_redelivered_total", "Messages redelivered to consumers.", d.Redelivered.Load(), 0},
			{"messages_acknowledged_total", "Messages acknowledged by consumers.", d.Acked.Load(), 0},
		} {
			e.counter(p+m.name, m.help, m.amqp, "protocol", "amqp091", "queue_type", amqp.QueueTypeLabel(qt))
			if qt == amqp.QueueTypeStream {
				e.counter(p+m.name, m.help, m.stream, "protocol", "stream", "queue_type", amqp.QueueTypeLabel(qt))
			}
		}
	}
	e.gauge(p+"publishers", "Current number of publishers.", float64(amqpPublishers), "protocol", "amqp091")
	e.gauge(p+"publishers", "Current number of publishers.", float64(streamPublishers), "protocol", "stream")
	e.gauge(p+"consumers", "Current number of consumers.", float64(amqpConsumers), "protocol", "amqp091")
	e.gauge(p+"consumers", "Current number of consumers.", float64(streamConsumers), "protocol", "stream")
	for code := range uint16(len(s.Errors)) {
		if name := streamErrorName(code); name != "" {
			e.counter(p+"stream_error_"+name+"_total", "Stream protocol errors answered: "+proto.CodeText(code)+".", s.Errors[code].Load(), "protocol", "stream")
		}
	}
}

// streamErrorName names a stream protocol error code as RabbitMQ's
// rabbitmq_global_stream_error_*_total counters do ("" for codes that are
// not errors).
func streamErrorName(code uint16) string {
	switch code {
	case proto.CodeStreamDoesNotExist:
		return "stream_does_not_exist"
	case proto.CodeSubscriptionIDAlreadyExists:
		return "subscription_id_already_exists"
	case proto.CodeSubscriptionIDDoesNotExist:
		return "subscription_id_does_not_exist"
	case proto.CodeStreamAlreadyExists:
		return "stream_already_exists"
	case proto.CodeStreamNotAvailable:
		return "stream_not_available"
	case proto.CodeSaslMechanismNotSupported:
		return "sasl_mechanism_not_supported"
	case proto.CodeAuthenticationFailure:
		return "authentication_failure"
	case proto.CodeSaslError:
		return "sasl_error"
	case proto.CodeSaslChallenge:
		return "sasl_challenge"
	case proto.CodeSaslAuthFailureLoopback:
		return "sasl_authentication_failure_loopback"
	case proto.CodeVirtualHostAccessFailure:
		return "vhost_access_failure"
	case proto.CodeUnknownFrame:
		return "unknown_frame"
	case proto.CodeFrameTooLarge:
		return "frame_too_large"
	case proto.CodeInternalError:
		return "internal_error"
	case proto.CodeAccessRefused:
		return "access_refused"
	case proto.CodePreconditionFailed:
		return "precondition_failed"
	case proto.CodePublisherDoesNotExist:
		return "publisher_does_not_exist"
	}
	return ""
}

// minus is a-b, or 0 when a counter read later got ahead.
func minus(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// churn is connections, channels and queues opened, closed, created and
// deleted (connection_churn_metrics).
func (c *rabbitCollector) churn(e emitter, prefix string) {
	n := c.b.Churn()
	e.counter(prefix+"connections_opened_total", "Connections opened.", n.ConnectionsOpened.Load())
	e.counter(prefix+"connections_closed_total", "Connections closed or terminated.", n.ConnectionsClosed.Load())
	e.counter(prefix+"channels_opened_total", "Channels opened.", n.ChannelsOpened.Load())
	e.counter(prefix+"channels_closed_total", "Channels closed.", n.ChannelsClosed.Load())
	e.counter(prefix+"queues_declared_total", "Queues declared.", n.QueuesDeclared.Load())
	e.counter(prefix+"queues_created_total", "Queues created.", n.QueuesCreated.Load())
	e.counter(prefix+"queues_deleted_total", "Queues deleted.", n.QueuesDeleted.Load())
}

// totals is what is open now: connections (AMQP and stream), channels,
// consumers and queues.
func (c *rabbitCollector) totals(e emitter) {
	streamConns, _, _ := c.b.StreamClients()
	e.gauge("rabbitmq_connections", "Connections currently open.", float64(len(c.b.Connections())+streamConns))
	e.gauge("rabbitmq_channels", "Channels currently open.", float64(len(c.b.Channels())))
	var queues, consumers int
	for _, v := range c.b.VhostList() {
		for _, q := range v.Queues() {
			queues++
			consumers += q.Stats().Consumers
		}
	}
	e.gauge("rabbitmq_consumers", "Consumers currently connected.", float64(consumers))
	e.gauge("rabbitmq_queues", "Queues available.", float64(queues))
}

// node is the node's resources and the limits that raise its alarms
// (node_coarse_metrics and node_metrics).
func (c *rabbitCollector) node(e emitter, prefix string) {
	r := c.b.Resources()
	if r.FDUsed >= 0 {
		e.gauge(prefix+"process_open_fds", "Open file descriptors.", float64(r.FDUsed))
	}
	if r.FDLimit >= 0 {
		e.gauge(prefix+"process_max_fds", "Open file descriptors limit.", float64(r.FDLimit))
	}
	e.gauge(prefix+"process_resident_memory_bytes", "Memory used in bytes, the figure the memory alarm compares to its limit.", float64(r.MemUsed))
	e.gauge(prefix+"resident_memory_limit_bytes", "Memory high watermark in bytes (0: no memory alarm).", float64(r.MemLimit))
	if r.DiskFree >= 0 {
		e.gauge(prefix+"disk_space_available_bytes", "Disk space available to the data directory in bytes.", float64(r.DiskFree))
	}
	e.gauge(prefix+"disk_space_available_limit_bytes", "Free disk space low watermark in bytes.", float64(r.DiskFreeLimit))
	if !r.StartedAt.IsZero() {
		e.gauge(prefix+"erlang_uptime_seconds", "Node uptime.", time.Since(r.StartedAt).Seconds())
	}
}

// alarms is rabbitmq_alarms_*: 1 while a resource alarm is in effect.
func (c *rabbitCollector) alarms(e emitter) {
	r := c.b.Resources()
	e.emit(prometheus.UntypedValue, "rabbitmq_alarms_free_disk_space_watermark", "1 while the free disk space alarm is in effect.", b2f(r.DiskAlarm))
	e.emit(prometheus.UntypedValue, "rabbitmq_alarms_memory_used_watermark", "1 while the memory alarm is in effect.", b2f(r.MemAlarm))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// messageSizes is rabbitmq_message_size_bytes, the histogram of the body
// sizes of messages published over AMQP 0.9.1.
func (c *rabbitCollector) messageSizes(e emitter) {
	a := c.b.Counters()
	buckets := make(map[float64]uint64, len(amqp.MessageSizeBuckets))
	var cum uint64
	for i, ub := range amqp.MessageSizeBuckets {
		cum += a.SizeBuckets[i].Load()
		buckets[float64(ub)] = cum
	}
	cum += a.SizeBuckets[len(amqp.MessageSizeBuckets)].Load()
	d := prometheus.NewDesc("rabbitmq_message_size_bytes", "Size of messages received from publishers.", []string{"protocol"}, nil)
	e.ch <- prometheus.MustNewConstHistogram(d, cum, float64(a.SizeSum.Load()), buckets, "amqp091")
}

// queues is the queue families: one series per queue (perObject) with
// rabbitmq_queue_info, or sums over all queues; and the node's totals.
func (c *rabbitCollector) queues(e emitter, prefix string, perObject bool) {
	want := func(family string) bool { return c.families == nil || c.families[family] }
	coarse, consumerCount, full := want(familyQueueCoarse), want(familyQueueConsumer), want(familyQueue)
	var ready, unacked, consumers, readyBytes, unackedBytes, memBytes float64
	for _, v := range c.b.VhostList() {
		if c.vhosts != nil && !c.vhosts[v.Name()] {
			continue
		}
		for _, q := range v.Queues() {
			st, info := q.Stats(), q.Info()
			ready += float64(st.Ready)
			unacked += float64(st.Unacked)
			consumers += float64(st.Consumers)
			readyBytes += float64(st.ReadyBytes)
			unackedBytes += float64(st.UnackedBytes)
			memBytes += float64(st.MemoryBytes)
			if !perObject {
				continue
			}
			l := []string{"vhost", info.Vhost, "queue", info.Name}
			if coarse {
				e.gauge(prefix+"queue_messages_ready", "Messages ready to be delivered to consumers.", float64(st.Ready), l...)
				e.gauge(prefix+"queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged.", float64(st.Unacked), l...)
				e.gauge(prefix+"queue_messages", "Ready and unacknowledged messages: the queue's depth.", float64(st.Ready+st.Unacked), l...)
			}
			if consumerCount || full {
				e.gauge(prefix+"queue_consumers", "Consumers on the queue.", float64(st.Consumers), l...)
			}
			if full {
				e.gauge(prefix+"queue_messages_bytes", "Bytes of ready and unacknowledged message bodies.", float64(st.ReadyBytes+st.UnackedBytes), l...)
				e.gauge(prefix+"queue_messages_ready_bytes", "Bytes of ready message bodies.", float64(st.ReadyBytes), l...)
				e.gauge(prefix+"queue_messages_unacked_bytes", "Bytes of unacknowledged message bodies.", float64(st.UnackedBytes), l...)
				e.gauge(prefix+"queue_process_memory_bytes", "Memory the queue holds for messages in bytes.", float64(st.MemoryBytes), l...)
			}
			if coarse || consumerCount || full {
				e.gauge(prefix+"queue_info", "Constant 1, with labels that describe the queue.", 1,
					"vhost", info.Vhost, "queue", info.Name, "queue_type", rabbitQueueType(info.Type), "membership", "leader")
			}
		}
	}
	if perObject {
		return
	}
	e.gauge(prefix+"queue_messages_ready", "Messages ready to be delivered to consumers.", ready)
	e.gauge(prefix+"queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged.", unacked)
	e.gauge(prefix+"queue_messages", "Ready and unacknowledged messages: the queues' depth.", ready+unacked)
	e.gauge(prefix+"queue_consumers", "Consumers on queues.", consumers)
	e.gauge(prefix+"queue_messages_bytes", "Bytes of ready and unacknowledged message bodies.", readyBytes+unackedBytes)
	e.gauge(prefix+"queue_messages_ready_bytes", "Bytes of ready message bodies.", readyBytes)
	e.gauge(prefix+"queue_messages_unacked_bytes", "Bytes of unacknowledged message bodies.", unackedBytes)
	e.gauge(prefix+"queue_process_memory_bytes", "Memory queues hold for messages in bytes.", memBytes)
}

// rabbitQueueType is RabbitMQ's module name for a queue type, as its
// rabbitmq_queue_info labels carry it.
func rabbitQueueType(t string) string {
	switch t {
	case "quorum":
		return "rabbit_quorum_queue"
	case "stream":
		return "rabbit_stream_queue"
	}
	return "rabbit_classic_queue"
}

// detailedCollector parses /metrics/detailed's query: family (repeated)
// and vhost (repeated; unknown vhosts ignored, as RabbitMQ does).
func detailedCollector(b Broker, families, vhosts []string) *rabbitCollector {
	c := &rabbitCollector{b: b, endpoint: "detailed", families: map[string]bool{}}
	for _, f := range families {
		c.families[f] = true
	}
	if len(vhosts) > 0 {
		c.vhosts = map[string]bool{}
		for _, v := range vhosts {
			c.vhosts[v] = true
		}
	}
	return c
}
