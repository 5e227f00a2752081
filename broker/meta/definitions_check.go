package meta

import (
	"fmt"
	"regexp"
)

// CheckAccess reports the first item of d that ImportAccess would refuse,
// changing nothing: each user, vhost, permission and policy is validated as
// the store would validate it at that point of the import (against what
// the store holds and what the items before it add). The error names the
// item (its section, index and name) and wraps ErrInvalid or ErrNotFound.
func CheckAccess(s Store, d Definitions) error {
	st := &State{}
	st.init()
	for _, v := range s.Vhosts() {
		st.Vhosts[v.Name] = v
	}
	for _, u := range s.Users() {
		st.Users[u.Name] = u
	}
	step := func(item string, c Command) error {
		if err := st.Validate(c); err != nil {
			return fmt.Errorf("%s: %w", item, err)
		}
		st.Apply(c)
		return nil
	}
	for i, u := range d.Users {
		item := fmt.Sprintf("users[%d] '%s'", i, u.Name)
		if a := u.HashingAlgorithm; a != "" && a != "rabbit_password_hashing_sha256" {
			return fmt.Errorf("%s: %w: unsupported hashing_algorithm '%s'", item, ErrInvalid, a)
		}
		if err := step(item, Command{Op: OpPutUser, User: &User{Name: u.Name}}); err != nil {
			return err
		}
	}
	for i, v := range d.Vhosts {
		mv := Vhost{Name: v.Name, DefaultQueueType: v.DefaultQueueType, Storage: v.Storage}
		if dq, ok := v.Metadata["default_queue_type"].(string); ok && mv.DefaultQueueType == "" {
			mv.DefaultQueueType = dq
		}
		if err := step(fmt.Sprintf("vhosts[%d] '%s'", i, v.Name), Command{Op: OpPutVhost, Vhost: &mv}); err != nil {
			return err
		}
	}
	for i, p := range d.Permissions {
		item := fmt.Sprintf("permissions[%d] of '%s' in vhost '%s'", i, p.User, p.Vhost)
		for _, re := range []string{p.Configure, p.Write, p.Read} {
			if _, err := regexp.Compile(re); err != nil {
				return fmt.Errorf("%s: %w: pattern '%s': %v", item, ErrInvalid, re, err)
			}
		}
		if err := step(item, Command{Op: OpPutPermission, Permission: &p}); err != nil {
			return err
		}
	}
	for i, p := range d.Policies {
		item := fmt.Sprintf("policies[%d] '%s' in vhost '%s'", i, p.Name, p.Vhost)
		if _, err := regexp.Compile(p.Pattern); err != nil || p.Pattern == "" {
			return fmt.Errorf("%s: %w: pattern '%s' is not a regular expression", item, ErrInvalid, p.Pattern)
		}
		switch p.ApplyTo {
		case "", "all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams":
		default:
			return fmt.Errorf("%s: %w: apply-to '%s'", item, ErrInvalid, p.ApplyTo)
		}
		if err := step(item, Command{Op: OpPutPolicy, Policy: &p}); err != nil {
			return err
		}
	}
	for i, p := range d.TopicPerms {
		return fmt.Errorf("topic_permissions[%d] of '%v' in vhost '%v': %w: topic permissions are not supported", i, p["user"], p["vhost"], ErrInvalid)
	}
	for i, p := range d.Parameters {
		return fmt.Errorf("parameters[%d] '%v' of component '%v' in vhost '%v': %w: runtime parameters are not supported", i, p["name"], p["component"], p["vhost"], ErrInvalid)
	}
	return nil
}
