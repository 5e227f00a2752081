//go:build linux

package faults

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The delayer is Netem's delay on kernels without sch_netem: an iptables
// NFQUEUE rule hands every packet the node sends to a netlink queue, and
// this process gives each its ACCEPT verdict delay after it was queued.
// Packets leave in the order they were sent. The constants are those of
// linux/netfilter/nfnetlink_queue.h (x/sys/unix does not carry them).
const (
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3

	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1

	nfAccept = 1

	// delayQueue is the queue number in the node's namespace (queues are
	// per namespace, so every node can use the same).
	delayQueue = 7
	// delayQueueMax is how many packets the kernel holds for the verdicts.
	delayQueueMax = 65536
)

// delayer holds packets of one node for delay.
type delayer struct {
	node  *Node
	delay time.Duration
	rule  []string
	f     *os.File // the netlink socket
	seq   uint32

	pending chan held     // packets in the order they were queued
	flush   chan struct{} // closed by stop: give every verdict at once
	wg      sync.WaitGroup
	mu      sync.Mutex // serializes writes on f
}

type held struct {
	id  uint32
	due time.Time
}

// startDelayer binds a netlink queue in node n's namespace and routes every
// packet n sends on its veth through it.
func startDelayer(n *Node, delay time.Duration) (*delayer, error) {
	d := &delayer{node: n, delay: delay, pending: make(chan held, delayQueueMax), flush: make(chan struct{})}
	err := inNetns(n.Netns, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netlink bind: %w", err)
		}
		d.f = os.NewFile(uintptr(fd), "nfqueue")
		return nil
	})
	if err != nil {
		return nil, err
	}
	cmd := make([]byte, 4)
	cmd[0] = nfqnlCfgCmdBind
	binary.BigEndian.PutUint16(cmd[2:], unix.AF_INET)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0xffff)
	params[4] = nfqnlCopyMeta
	qmax := binary.BigEndian.AppendUint32(nil, delayQueueMax)
	if err := d.send(nfqnlMsgConfig, unix.AF_INET, true, attr(nfqaCfgCmd, cmd)); err != nil {
		d.f.Close()
		return nil, fmt.Errorf("bind queue: %w", err)
	}
	if err := d.send(nfqnlMsgConfig, unix.AF_INET, true, attr(nfqaCfgParams, params), attr(nfqaCfgQueueMax, qmax)); err != nil {
		d.f.Close()
		return nil, fmt.Errorf("configure queue: %w", err)
	}
	d.wg.Add(2)
	go d.read()
	go d.release()
	d.rule = []string{"OUTPUT", "-o", n.nsVeth, "-j", "NFQUEUE", "--queue-num", strconv.Itoa(delayQueue)}
	if _, err := inNS(n.Netns, "iptables", append([]string{"-w", "5", "-I"}, d.rule...)...); err != nil {
		d.rule = nil
		d.stop()
		return nil, err
	}
	return d, nil
}

// stop routes packets past the queue again, gives every held packet its
// verdict at once and closes the queue.
func (d *delayer) stop() {
	if d.rule != nil {
		_, _ = inNS(d.node.Netns, "iptables", append([]string{"-w", "5", "-D"}, d.rule...)...)
	}
	close(d.flush)
	time.Sleep(50 * time.Millisecond) // packets queued just before the rule went
	d.f.Close()
	d.wg.Wait()
}

// read takes queued packets off the socket in order.
func (d *delayer) read() {
	defer d.wg.Done()
	defer close(d.pending)
	buf := make([]byte, 1<<16)
	for {
		n, err := d.f.Read(buf)
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				continue // the kernel overran us; those packets wait for a verdict we cannot give
			}
			return // closed by stop
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		now := time.Now()
		for _, m := range msgs {
			if m.Header.Type != unix.NFNL_SUBSYS_QUEUE<<8|nfqnlMsgPacket || len(m.Data) < 4 {
				continue
			}
			if hdr := findAttr(m.Data[4:], nfqaPacketHdr); len(hdr) >= 4 {
				d.pending <- held{id: binary.BigEndian.Uint32(hdr), due: now.Add(d.delay)}
			}
		}
	}
}

// release gives each held packet its ACCEPT verdict when it is due (at once
// after stop).
func (d *delayer) release() {
	defer d.wg.Done()
	for p := range d.pending {
		if wait := time.Until(p.due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-d.flush:
			}
		}
		v := make([]byte, 8)
		binary.BigEndian.PutUint32(v, nfAccept)
		binary.BigEndian.PutUint32(v[4:], p.id)
		_ = d.send(nfqnlMsgVerdict, unix.AF_UNSPEC, false, attr(nfqaVerdictHdr, v))
	}
}

// send writes one nfnetlink_queue message; with ack it reads the kernel's
// answer and returns its error (only before read runs: config messages).
func (d *delayer) send(msgType uint16, family uint8, ack bool, attrs ...[]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	body := []byte{family, unix.NFNETLINK_V0, 0, 0}
	binary.BigEndian.PutUint16(body[2:], delayQueue)
	for _, a := range attrs {
		body = append(body, a...)
	}
	flags := uint16(unix.NLM_F_REQUEST)
	if ack {
		flags |= unix.NLM_F_ACK
	}
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], unix.NFNL_SUBSYS_QUEUE<<8|msgType)
	binary.NativeEndian.PutUint16(msg[6:], flags)
	binary.NativeEndian.PutUint32(msg[8:], d.seq)
	msg = append(msg, body...)
	if _, err := d.f.Write(msg); err != nil {
		return err
	}
	if !ack {
		return nil
	}
	buf := make([]byte, 4096)
	if err := d.f.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	defer d.f.SetReadDeadline(time.Time{})
	n, err := d.f.Read(buf)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				return unix.Errno(-errno)
			}
			return nil
		}
	}
	return fmt.Errorf("no acknowledgement in %d messages", len(msgs))
}

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, payload []byte) []byte {
	l := unix.SizeofNlAttr + len(payload)
	b := make([]byte, (l+unix.NLA_ALIGNTO-1) & ^(unix.NLA_ALIGNTO-1))
	binary.NativeEndian.PutUint16(b[0:], uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], payload)
	return b
}

// findAttr returns the payload of the first attribute of type typ in b.
func findAttr(b []byte, typ uint16) []byte {
	for len(b) >= unix.SizeofNlAttr {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		t := binary.NativeEndian.Uint16(b[2:]) & 0x3fff
		if l < unix.SizeofNlAttr || l > len(b) {
			return nil
		}
		if t == typ {
			return b[unix.SizeofNlAttr:l]
		}
		al := (l + unix.NLA_ALIGNTO - 1) & ^(unix.NLA_ALIGNTO - 1)
		if al >= len(b) {
			return nil
		}
		b = b[al:]
	}
	return nil
}
