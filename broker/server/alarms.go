package server

import (
	"context"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/warrenmq/warren/broker/mgmt"
)

// Resources implements mgmt.Broker: the last sample of the resource watch
// (every second) with the limits that raise the alarms.
func (b *Broker) Resources() mgmt.NodeResources {
	b.alarmMu.Lock()
	defer b.alarmMu.Unlock()
	r := b.resources
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

// watchResources raises and clears the memory and disk alarms every second.
// While an alarm is raised, publishing connections are blocked
// (connection.blocked), as RabbitMQ does.
func (b *Broker) watchResources(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for {
		metrics.Read(samples)
		heap := int64(samples[0].Value.Uint64())
		mem := b.memoryLimit > 0 && heap > b.memoryLimit
		disk := false
		free := int64(-1)
		var st syscall.Statfs_t
		if err := syscall.Statfs(b.cfg.DataDir, &st); err == nil {
			free = int64(st.Bavail) * int64(st.Bsize)
			disk = free < b.cfg.Limits.DiskFreeLimit
		}
		b.alarmMu.Lock()
		b.resources.MemUsed, b.resources.DiskFree = heap, free
		changed := mem != b.memAlarm || disk != b.diskAlarm
		b.memAlarm, b.diskAlarm = mem, disk
		b.alarmMu.Unlock()
		if changed {
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
				b.log.Warn("resource alarm raised: blocking publishers", "reason", reason)
			} else {
				b.log.Info("resource alarms cleared")
			}
			b.AMQP.SetBlocked(reason)
			b.Stream.SetBlocked(reason)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
