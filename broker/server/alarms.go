package server

import (
	"context"
	"runtime/metrics"
	"time"

	"github.com/warrenmq/warren/broker/mgmt"
)

// Resources implements mgmt.Broker: the last sample of the resource watch
// (every second) with the limits that raise the alarms.
func (b *Broker) Resources() mgmt.NodeResources {
	fdUsed, fdLimit := openFDs()
	b.alarmMu.Lock()
	defer b.alarmMu.Unlock()
	r := b.resources
	r.FDUsed, r.FDLimit = fdUsed, fdLimit
	r.StartedAt, r.MemLimit, r.DiskFreeLimit = b.startedAt, b.memoryLimit, b.cfg.Limits.DiskFreeLimit
	r.MemAlarm, r.DiskAlarm = b.memAlarm, b.diskAlarm
	return r
}

// Alarms returns the active resource alarms ("memory", "disk").
func (b *Broker) Alarms() []string {
	b.alarmMu.Lock()
	defer b.alarmMu.Unlock()
	var out []string
	if b.memAlarm {
		out = append(out, "memory")
	}
	if b.diskAlarm {
		out = append(out, "disk")
	}
	return out
}

// watchResources samples memory and disk every second, raising and clearing
// the alarms. While an alarm is raised, publishing connections are blocked
// (connection.blocked), as RabbitMQ does. The disk alarm is also raised
// between samples, by the writers (see store.DiskWatch): when what they are
// about to write takes the free space below the limit, and when a write
// finds the disk full.
func (b *Broker) watchResources(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for {
		metrics.Read(samples)
		heap := int64(samples[0].Value.Uint64())
		mem := b.memoryLimit > 0 && heap > b.memoryLimit
		free := b.disk.Sample()
		b.alarmMu.Lock()
		b.resources.MemUsed, b.resources.DiskFree = heap, free
		changed := mem != b.memAlarm
		b.memAlarm = mem
		b.alarmMu.Unlock()
		if changed {
			b.applyAlarms()
		}
		b.ExchangeStats() // forget the counters of deleted exchanges
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// diskAlarmChanged is the disk watch's callback: it may run on a queue's
// goroutine, in the middle of a write, so the blocked notification reaches
// publishers before the nack of a write that found the disk full.
func (b *Broker) diskAlarmChanged(alarm bool) {
	b.alarmMu.Lock()
	b.diskAlarm = alarm
	b.alarmMu.Unlock()
	b.applyAlarms()
}

// applyAlarms tells the protocol servers the current alarms; blockMu keeps
// concurrent changes (the watch, a writer) in order.
func (b *Broker) applyAlarms() {
	b.blockMu.Lock()
	defer b.blockMu.Unlock()
	b.alarmMu.Lock()
	mem, disk := b.memAlarm, b.diskAlarm
	changed := mem != b.blockedMem || disk != b.blockedDisk
	b.blockedMem, b.blockedDisk = mem, disk
	b.alarmMu.Unlock()
	if !changed {
		return
	}
	reason := ""
	switch {
	case mem && disk:
		reason = "memory and disk alarms"
	case mem:
		reason = "memory alarm"
	case disk:
		reason = "disk alarm"
	}
	if reason != "" {
		b.log.Warn("resource alarm raised: blocking publishers", "reason", reason, "disk_free", b.disk.Free(), "disk_free_limit", b.cfg.Limits.DiskFreeLimit)
	} else {
		b.log.Info("resource alarms cleared")
	}
	if b.AMQP != nil {
		b.AMQP.SetBlocked(reason)
	}
	if b.Stream != nil {
		b.Stream.SetBlocked(reason)
	}
}
