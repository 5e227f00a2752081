package auth

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/warrenmq/warren/broker/meta"
)

// ErrRefused is wrapped by every refused login.
var ErrRefused = errors.New("login refused")

// ErrLoopbackOnly is wrapped (with ErrRefused) when the password was right
// but the user may only log in from a loopback address.
var ErrLoopbackOnly = errors.New("user can only log in via localhost")

// ErrUnknownUser and ErrWrongPassword are wrapped (with ErrRefused) when
// there is no such user and when the password is not theirs. They are for
// the broker's log: a client is told neither (it could learn which users
// exist).
var (
	ErrUnknownUser   = errors.New("no such user")
	ErrWrongPassword = errors.New("wrong password")
)

// Users looks users up by name (meta.Store does).
type Users interface {
	User(name string) (meta.User, bool)
}

// Checker accepts or refuses logins.
type Checker struct {
	users    Users
	loopback map[string]bool
}

// NewChecker returns a Checker over users in which loopbackUsers may log in
// only from a loopback address.
func NewChecker(users Users, loopbackUsers []string) *Checker {
	c := &Checker{users: users, loopback: make(map[string]bool, len(loopbackUsers))}
	for _, u := range loopbackUsers {
		c.loopback[u] = true
	}
	return c
}

// Login returns the user named name when password is theirs and they may log
// in from remote, the peer address of the connection.
func (c *Checker) Login(name, password string, remote net.Addr) (meta.User, error) {
	u, ok := c.users.User(name)
	if !ok {
		return meta.User{}, fmt.Errorf("%w: user '%s' - invalid credentials (%w)", ErrRefused, name, ErrUnknownUser)
	}
	if !u.CheckPassword(password) {
		return meta.User{}, fmt.Errorf("%w: user '%s' - invalid credentials (%w)", ErrRefused, name, ErrWrongPassword)
	}
	if c.loopback[name] && !IsLoopback(remote) {
		return meta.User{}, fmt.Errorf("%w: user '%s' can only connect via localhost, not from %v (%w)", ErrRefused, name, remote, ErrLoopbackOnly)
	}
	return u, nil
}

// IsLoopback reports whether a peer address is a loopback one; a Unix
// socket counts as loopback, an unknown or missing address does not.
func IsLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// PeerAddr turns an HTTP request's RemoteAddr ("ip:port", as net/http
// sets it from the socket) into a net.Addr for Login; nil when it does not
// parse, which Login treats as not loopback.
func PeerAddr(remoteAddr string) net.Addr {
	// SplitHostPort first: netip alone accepts forms net/http never
	// writes (a zone holding "]"), and one parser should decide.
	host, port, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return nil
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}

// Refusal explains a refused login for the log: reason names why in a few
// words (unknown user, wrong password, not allowed from this address, or
// refused), detail is the error's text after "login refused: " in
// RabbitMQ's wording. Clients are told less (see each protocol's handshake).
func Refusal(err error) (reason, detail string) {
	switch {
	case errors.Is(err, ErrUnknownUser):
		reason = "unknown user"
	case errors.Is(err, ErrWrongPassword):
		reason = "wrong password"
	case errors.Is(err, ErrLoopbackOnly):
		reason = "not allowed from this address"
	default:
		reason = "refused"
	}
	return reason, strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")
}
