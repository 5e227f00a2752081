package amqp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/auth"
	"github.com/warrenmq/warren/broker/meta"
)

// The connection handshake: protocol header, start/start-ok (PLAIN and
// AMQPLAIN), tune/tune-ok and open.

func (c *conn) serverProperties() wire.Table {
	return wire.Table{
		"product":      c.srv.cfg.Product,
		"version":      c.srv.cfg.Version,
		"platform":     "Go",
		"copyright":    "Warren authors",
		"information":  "Licensed under the Apache License 2.0",
		"cluster_name": "warren",
		"capabilities": wire.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"connection.blocked":           true,
			"consumer_priorities":          true,
			"authentication_failure_close": true,
			"per_consumer_qos":             true,
			"direct_reply_to":              false,
		},
	}
}

// handshake runs protocol header, start, tune and open.
func (c *conn) handshake() error {
	_ = c.nc.SetDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout))
	hdr, err := c.r.ReadProtocolHeader()
	if err != nil {
		return fmt.Errorf("read protocol header: %w", err)
	}
	// As RabbitMQ: logged once the client sent something, so TCP health
	// checks that connect and go are not.
	c.srv.log.Info("accepting AMQP connection "+c.name, "peer", c.peer())
	if string(hdr[:]) != wire.ProtocolHeader {
		_, _ = c.nc.Write([]byte(wire.ProtocolHeader))
		return fmt.Errorf("bad protocol header %q", hdr[:])
	}
	c.r.SetMaxFrameSize(wire.FrameMinSize)
	write := func(m wire.Method) error {
		_, err := c.nc.Write(wire.AppendMethodFrame(nil, 0, m))
		return err
	}
	if err := write(&wire.ConnectionStart{VersionMajor: 0, VersionMinor: 9, ServerProperties: c.serverProperties(), Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US"}); err != nil {
		return err
	}
	m, err := c.readHandshakeMethod()
	if err != nil {
		return err
	}
	startOk, ok := m.(*wire.ConnectionStartOk)
	if !ok {
		return c.handshakeFail(newError(wire.CommandInvalid, "expected 'connection.start_ok', got '%s'", m.Name()))
	}
	c.clientProps = startOk.ClientProperties
	if caps, ok := c.clientProps["capabilities"].(wire.Table); ok {
		blocked, _ := caps["connection.blocked"].(bool)
		c.capBlocked.Store(blocked)
		c.capCancel, _ = caps["consumer_cancel_notify"].(bool)
	}
	user, pass, err := decodeSASL(startOk.Mechanism, startOk.Response)
	if err != nil {
		c.logRefused("starting", "", "malformed credentials", fmt.Sprintf("%s login refused: %v", startOk.Mechanism, err))
		return c.handshakeFail(newError(wire.AccessRefused, "%s", err))
	}
	if err := c.srv.backend.Authenticate(user, pass, c.nc.RemoteAddr()); err != nil {
		reason, detail := auth.Refusal(err)
		c.logRefused("starting", user, reason, fmt.Sprintf("%s login refused: %s", startOk.Mechanism, detail))
		return c.handshakeFail(newError(wire.AccessRefused, "Login was refused using authentication mechanism %s. For details see the broker logfile.", startOk.Mechanism))
	}
	c.user = user
	c.impersonator = slices.Contains(c.srv.backend.UserTags(user), "impersonator")
	hb := uint16(c.srv.cfg.Heartbeat / time.Second)
	if err := write(&wire.ConnectionTune{ChannelMax: c.srv.cfg.ChannelMax, FrameMax: c.srv.cfg.FrameMax, Heartbeat: hb}); err != nil {
		return err
	}
	if m, err = c.readHandshakeMethod(); err != nil {
		return err
	}
	tuneOk, ok := m.(*wire.ConnectionTuneOk)
	if !ok {
		return c.handshakeFail(newError(wire.CommandInvalid, "expected 'connection.tune_ok', got '%s'", m.Name()))
	}
	c.frameMax = negotiate32(c.srv.cfg.FrameMax, tuneOk.FrameMax)
	if c.frameMax < wire.FrameMinSize {
		return c.handshakeFail(newError(wire.NotAllowed, "frame_max=%d < %d min size", tuneOk.FrameMax, wire.FrameMinSize))
	}
	c.channelMax = uint16(negotiate32(uint32(c.srv.cfg.ChannelMax), uint32(tuneOk.ChannelMax)))
	c.heartbeat = time.Duration(tuneOk.Heartbeat) * time.Second
	c.r.SetMaxFrameSize(c.frameMax)
	if m, err = c.readHandshakeMethod(); err != nil {
		return err
	}
	open, ok := m.(*wire.ConnectionOpen)
	if !ok {
		return c.handshakeFail(newError(wire.CommandInvalid, "expected 'connection.open', got '%s'", m.Name()))
	}
	vh, ok := c.srv.backend.Vhost(open.VirtualHost)
	if !ok {
		e := newError(wire.NotAllowed, "vhost '%s' not found", open.VirtualHost)
		c.logRefused("opening", user, "no such vhost", e.Text)
		return c.handshakeFail(e)
	}
	perm, ok := c.srv.backend.Permission(user, open.VirtualHost)
	if !ok {
		e := newError(wire.NotAllowed, "access to vhost '%s' refused for user '%s'", open.VirtualHost, user)
		c.logRefused("opening", user, "no access to the vhost", e.Text)
		return c.handshakeFail(e)
	}
	c.vh, c.perm = vh, meta.CompilePermission(perm)
	// Listed from now on: a client that has open-ok may ask the HTTP API
	// for its connection at once.
	c.state.Store("running")
	if err := write(&wire.ConnectionOpenOk{}); err != nil {
		return err
	}
	c.srv.log.Info(fmt.Sprintf("connection %s: user '%s' authenticated and granted access to vhost '%s'", c.name, user, open.VirtualHost),
		"peer", c.peer(), "user", user, "vhost", open.VirtualHost)
	_ = c.nc.SetDeadline(time.Time{})
	return nil
}

// peer is the client's address, for the log.
func (c *conn) peer() string { return c.nc.RemoteAddr().String() }

// logRefused logs, at info as RabbitMQ's connection errors read, a
// handshake the broker refused: the client, the user it named, a short
// reason (unknown user, wrong password, not allowed from this address, no
// such vhost, no access to the vhost, malformed credentials) and
// RabbitMQ's wording of it. The client itself is told less (see
// handshake): whether a user exists is for the operator to read.
func (c *conn) logRefused(state, user, reason, text string) {
	c.srv.log.Info(fmt.Sprintf("Error on AMQP connection %s (state: %s): %s", c.name, state, text),
		"peer", c.peer(), "user", user, "reason", reason)
}

func negotiate32(server, client uint32) uint32 {
	if client == 0 || (server != 0 && server < client) {
		return server
	}
	return client
}

func (c *conn) readHandshakeMethod() (wire.Method, error) {
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			if fe := frameError(err, c.r.MaxFrameSize()); fe != nil {
				// As after the handshake: the client is told why.
				return nil, c.handshakeFail(fe)
			}
			return nil, fmt.Errorf("read handshake frame: %w", err)
		}
		c.recvOct.Add(uint64(len(f.Payload)) + 8)
		if f.Type == wire.FrameHeartbeat {
			if err := checkHeartbeat(f); err != nil {
				return nil, c.handshakeFail(err.(*Error))
			}
			continue
		}
		if f.Type != wire.FrameMethod || f.Channel != 0 {
			return nil, c.handshakeFail(newError(wire.UnexpectedFrame, "expected a method frame on channel 0"))
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return nil, c.handshakeFail(newError(wire.FrameError, "cannot decode method: %v", err))
		}
		if cl, ok := m.(*wire.ConnectionClose); ok {
			_, _ = c.nc.Write(wire.AppendMethodFrame(nil, 0, &wire.ConnectionCloseOk{}))
			return nil, fmt.Errorf("client closed during handshake: %d %s", cl.ReplyCode, cl.ReplyText)
		}
		return m, nil
	}
}

// handshakeFail sends connection.close and returns the error.
func (c *conn) handshakeFail(e *Error) error {
	_, _ = c.nc.Write(wire.AppendMethodFrame(nil, 0, &wire.ConnectionClose{ReplyCode: e.Code, ReplyText: e.Text, ClassId: e.ClassID, MethodId: e.MethodID}))
	// Give the client a moment to read it before the socket goes.
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = c.r.ReadFrame()
	return e
}

func decodeSASL(mechanism, response string) (string, string, error) {
	switch mechanism {
	case "PLAIN":
		parts := strings.SplitN(response, "\x00", 3)
		if len(parts) != 3 {
			return "", "", errors.New("malformed PLAIN response")
		}
		return parts[1], parts[2], nil
	case "AMQPLAIN":
		var b bytes.Buffer
		n := len(response)
		b.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		b.WriteString(response)
		t, _, err := wire.DecodeTable(b.Bytes())
		if err != nil {
			return "", "", fmt.Errorf("malformed AMQPLAIN response: %w", err)
		}
		u, _ := t["LOGIN"].(string)
		p, _ := t["PASSWORD"].(string)
		return u, p, nil
	}
	return "", "", fmt.Errorf("unsupported authentication mechanism '%s'", mechanism)
}
