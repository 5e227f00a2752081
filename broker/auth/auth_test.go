package auth_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/auth"
	"github.com/warrenmq/warren/broker/meta"
)

type users map[string]meta.User

func (u users) User(name string) (meta.User, bool) { x, ok := u[name]; return x, ok }

func TestLogin(t *testing.T) {
	hash := func(pw string) string {
		h, err := meta.HashPassword(pw)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	c := auth.NewChecker(users{
		"guest": {Name: "guest", PasswordHash: hash("guest")},
		"app":   {Name: "app", PasswordHash: hash("pw")},
	}, []string{"guest"})
	tests := []struct {
		name, user, pass, remote string
		want                     error // nil: accepted
	}{
		{"loopback user from 127.0.0.1", "guest", "guest", "127.0.0.1:5000", nil},
		{"loopback user from ::1", "guest", "guest", "[::1]:5000", nil},
		{"loopback user from IPv4-mapped loopback", "guest", "guest", "[::ffff:127.0.0.1]:5000", nil},
		{"loopback user from another host", "guest", "guest", "192.0.2.7:5000", auth.ErrLoopbackOnly},
		{"loopback user from an address that does not parse", "guest", "guest", "garbage", auth.ErrLoopbackOnly},
		{"loopback user with a wrong password from another host", "guest", "x", "192.0.2.7:5000", auth.ErrWrongPassword},
		{"other user from another host", "app", "pw", "192.0.2.7:5000", nil},
		{"wrong password", "app", "x", "127.0.0.1:5000", auth.ErrWrongPassword},
		{"unknown user", "nobody", "pw", "127.0.0.1:5000", auth.ErrUnknownUser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := c.Login(tt.user, tt.pass, auth.PeerAddr(tt.remote))
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == nil && u.Name != tt.user:
				t.Fatalf("user = %q, want %q", u.Name, tt.user)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("err = %v, want %v", err, tt.want)
			case tt.want != nil && !errors.Is(err, auth.ErrRefused):
				t.Fatalf("err = %v does not wrap ErrRefused", err)
			case tt.want != auth.ErrLoopbackOnly && errors.Is(err, auth.ErrLoopbackOnly):
				t.Fatalf("a wrong password reported as loopback-only: %v", err)
			}
		})
	}
	if !auth.IsLoopback(&net.UnixAddr{Name: "/tmp/s", Net: "unix"}) {
		t.Error("a Unix socket is not loopback")
	}
}

// PeerAddr takes whatever net/http put in RemoteAddr: it never panics, and
// an address counts as loopback only when it parses as a loopback IP.
func FuzzPeerAddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1:1", "[::1]:2", "[::ffff:127.0.0.1]:3", "192.0.2.1:4", "", "garbage", "[fe80::1%eth0]:5", "127.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, remote string) {
		a := auth.PeerAddr(remote)
		if !auth.IsLoopback(a) {
			return
		}
		host, _, err := net.SplitHostPort(remote)
		if err != nil {
			t.Fatalf("%q: loopback without a host and port", remote)
		}
		if ip := net.ParseIP(strings.Split(host, "%")[0]); ip == nil || !ip.IsLoopback() {
			t.Fatalf("%q: loopback, but its host %q is not", remote, host)
		}
	})
}
