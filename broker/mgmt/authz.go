package mgmt

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/warrenmq/warren/broker/auth"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
)

// caller is the authenticated user of a request, with what its tags give.
type caller struct {
	meta.User
	management, policymaker, monitor, admin bool
	// others: the route's Others tag is the caller's; it reaches other
	// users' connections and channels.
	others bool
}

func newCaller(u meta.User) caller {
	c := caller{User: u, admin: u.HasTag("administrator")}
	c.policymaker = c.admin || u.HasTag("policymaker")
	c.monitor = c.admin || u.HasTag("monitoring")
	c.management = c.policymaker || c.monitor || u.HasTag("management")
	return c
}

// has reports whether the caller's tags give t.
func (c caller) has(t Tag) bool {
	switch t {
	case TagManagement:
		return c.management
	case TagPolicymaker:
		return c.policymaker
	case TagMonitoring:
		return c.monitor
	case TagAdministrator:
		return c.admin
	}
	return false
}

// refusals are RabbitMQ's reasons for a caller without a route's tag.
var refusals = [...]string{
	TagManagement:    "Not management user",
	TagPolicymaker:   "User not authorised to access object",
	TagMonitoring:    "Not monitor user",
	TagAdministrator: "Not administrator user",
}

// handle registers a route behind its checks: a login (401 with
// WWW-Authenticate when it fails), the route's tag, and access to the
// route's vhost; the handler then checks what it does in the vhost.
func (s *Server) handle(rt Route) {
	s.mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
		u, err := s.authenticate(r)
		if errors.Is(err, auth.ErrLoopbackOnly) {
			writeError(w, http.StatusUnauthorized, "not_authorised", "User can only log in via localhost")
			return
		}
		if err != nil && !errors.Is(err, errNoCredentials) && writeFault(w, s.b.Fault()) {
			return // no user table to check the credentials against
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="Warren Management"`)
			writeError(w, http.StatusUnauthorized, "not_authorized", "Login failed")
			return
		}
		c := newCaller(u)
		if !c.management || !c.has(rt.Tag) {
			writeError(w, http.StatusUnauthorized, "not_authorised", refusals[rt.Tag])
			return
		}
		if rt.Vhost == VhostPath && !c.admin {
			name := pathVhost(r, "vhost")
			if _, exists := s.b.Meta().Vhost(name); exists && !s.hasAccess(c, name) {
				reason := "User not authorised to access virtual host"
				if rt.Tag == TagPolicymaker {
					reason = refusals[TagPolicymaker]
				}
				writeError(w, http.StatusUnauthorized, "not_authorised", reason)
				return
			}
		}
		c.others = c.has(rt.Others)
		rt.fn(s, w, r, c)
	})
}

// authenticate checks the request's basic-auth credentials with the
// login rules every listener shares, from the socket's peer address.
func (s *Server) authenticate(r *http.Request) (meta.User, error) {
	name, pass, ok := r.BasicAuth()
	if !ok {
		return meta.User{}, errNoCredentials
	}
	return s.b.Login(name, pass, auth.PeerAddr(r.RemoteAddr))
}

var errNoCredentials = errors.New("no credentials")

// hasAccess reports whether the caller may log in to a vhost: a
// permission entry there, whatever its patterns, as AMQP's connection.open
// asks.
func (s *Server) hasAccess(c caller, vhost string) bool {
	_, ok := s.b.Meta().Permission(vhost, c.Name)
	return ok
}

// sees reports whether a vhost's objects (queues, exchanges, bindings,
// policies) are in the caller's lists: every vhost for an administrator,
// else those it has access to (RabbitMQ's filter_vhost; monitoring users
// too).
func (s *Server) sees(c caller, vhost string) bool {
	return c.admin || s.hasAccess(c, vhost)
}

// accessError is a refusal by permission patterns: 401 not_authorised.
type accessError struct{ reason string }

func (e *accessError) Error() string { return e.reason }

// access checks, as a channel would, that the caller's permissions in vhost
// allow kind of access to a resource ("queue" or "exchange"); administrators
// too need a permission. The error is an *accessError.
func (s *Server) access(c caller, vhost string, kind meta.Access, resource, name string) error {
	if p, ok := s.b.Meta().Permission(vhost, c.Name); ok && meta.CheckPermission(p, kind, name) {
		return nil
	}
	if resource == "exchange" {
		name = displayExchange(name)
	}
	return &accessError{reason: fmt.Sprintf("access to %s '%s' in vhost '%s' refused for user '%s'", resource, name, vhost, c.Name)}
}

// allowed is access that answers a refusal itself: it reports whether the
// handler may go on.
func (s *Server) allowed(w http.ResponseWriter, c caller, vhost string, kind meta.Access, resource, name string) bool {
	if err := s.access(c, vhost, kind, resource, name); err != nil {
		writeErr(w, err)
		return false
	}
	return true
}

// mayReach reports whether the caller reaches a connection or channel of
// user on the route (its Others tag, or their own).
func (c caller) mayReach(user string) bool { return c.others || user == c.Name }

// authorizeNewQueue is what RabbitMQ checks, beyond configure on the name,
// before it creates a queue (not for one that exists): when the arguments
// give a dead-letter exchange, read on the queue and write on that
// exchange, so that expired or rejected messages cannot reach an exchange
// the caller may not publish to. A policy's dead-letter exchange is not
// checked (policies have their own, privileged, users).
func (s *Server) authorizeNewQueue(c caller, vhost, name string, args queue.Args) error {
	if args.DeadLetterExchange == nil {
		return nil
	}
	if err := s.access(c, vhost, meta.Read, "queue", name); err != nil {
		return err
	}
	return s.access(c, vhost, meta.Write, "exchange", *args.DeadLetterExchange)
}

// authorizeNewExchange: a new exchange with an alternate exchange needs
// read on itself and write on the alternate one, as in RabbitMQ.
func (s *Server) authorizeNewExchange(c caller, vhost, name, alternate string) error {
	if alternate == "" {
		return nil
	}
	if err := s.access(c, vhost, meta.Read, "exchange", name); err != nil {
		return err
	}
	return s.access(c, vhost, meta.Write, "exchange", alternate)
}

// authorizeBinding: binding or unbinding needs write on the destination
// (queue or exchange) and read on the source exchange, as queue.bind and
// exchange.bind do.
func (s *Server) authorizeBinding(c caller, vhost string, b routing.Binding) error {
	dest := "queue"
	if b.ToExchange {
		dest = "exchange"
	}
	if err := s.access(c, vhost, meta.Write, dest, b.Destination); err != nil {
		return err
	}
	return s.access(c, vhost, meta.Read, "exchange", b.Source)
}
