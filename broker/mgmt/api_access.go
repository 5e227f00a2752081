package mgmt

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/warrenmq/warren/broker/meta"
)

func vhostJSON(v meta.Vhost) map[string]any {
	tags := v.Tags
	if tags == nil {
		tags = []string{}
	}
	return map[string]any{
		"name":               v.Name,
		"description":        v.Description,
		"tags":               tags,
		"default_queue_type": defaultStr(v.DefaultQueueType, "classic"),
		"metadata":           map[string]any{"description": v.Description, "tags": tags, "default_queue_type": defaultStr(v.DefaultQueueType, "classic")},
		"storage":            v.Storage,
		"tracing":            false,
	}
}

func defaultStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (s *Server) listVhosts(w http.ResponseWriter, r *http.Request, u caller) {
	out := []map[string]any{}
	for _, v := range s.b.Meta().Vhosts() {
		// Monitoring users learn of every vhost, others of theirs.
		if !u.monitor && !s.hasAccess(u, v.Name) {
			continue
		}
		m := vhostJSON(v)
		s.addVhostStats(m, v.Name)
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) addVhostStats(m map[string]any, name string) {
	var ready, unacked int
	if rv, ok := s.b.Vhost(name); ok {
		for _, q := range rv.Queues() {
			st := q.Stats()
			ready += st.Ready
			unacked += st.Unacked
		}
	}
	m["messages"] = ready + unacked
	m["messages_ready"] = ready
	m["messages_unacknowledged"] = unacked
}

func (s *Server) getVhost(w http.ResponseWriter, r *http.Request, u caller) {
	name := pathVhost(r, "vhost")
	v, ok := s.b.Meta().Vhost(name)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
		return
	}
	m := vhostJSON(v)
	s.addVhostStats(m, name)
	writeJSON(w, http.StatusOK, m)
}

// putVhost creates or updates a vhost. Warren's "storage" object sets the
// vhost's storage policy; a change applies to the running node at once.
func (s *Server) putVhost(w http.ResponseWriter, r *http.Request, u caller) {
	name := pathVhost(r, "vhost")
	var body struct {
		Description      *string               `json:"description"`
		Tags             any                   `json:"tags"`
		DefaultQueueType *string               `json:"default_queue_type"`
		Storage          *meta.StorageSettings `json:"storage"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeErr(w, err)
		return
	}
	old, existed := s.b.Meta().Vhost(name)
	v := old
	v.Name = name
	if body.Description != nil {
		v.Description = *body.Description
	}
	if body.Tags != nil {
		v.Tags = tagsOf(body.Tags)
	}
	if body.DefaultQueueType != nil {
		v.DefaultQueueType = *body.DefaultQueueType
	}
	if body.Storage != nil {
		v.Storage = *body.Storage
	}
	if err := s.b.Meta().PutVhost(r.Context(), v); err != nil {
		writeErr(w, err)
		return
	}
	if !existed {
		// The creating user gets full permissions, as RabbitMQ does.
		_ = s.b.Meta().PutPermission(r.Context(), meta.Permission{User: u.Name, Vhost: name, Configure: ".*", Write: ".*", Read: ".*"})
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deleteVhost(w http.ResponseWriter, r *http.Request, u caller) {
	name := pathVhost(r, "vhost")
	if err := s.b.Meta().DeleteVhost(r.Context(), name); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func userJSON(u meta.User) map[string]any {
	tags := u.Tags
	if tags == nil {
		tags = []string{}
	}
	return map[string]any{"name": u.Name, "password_hash": u.PasswordHash, "hashing_algorithm": defaultStr(u.HashingAlgorithm, "rabbit_password_hashing_sha256"), "tags": tags, "limits": map[string]any{}}
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, u caller) {
	tags := u.Tags
	if tags == nil {
		tags = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": u.Name, "tags": tags})
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, u caller) {
	out := []map[string]any{}
	for _, x := range s.b.Meta().Users() {
		out = append(out, userJSON(x))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request, u caller) {
	x, ok := s.b.Meta().User(pv(r, "user"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
		return
	}
	writeJSON(w, http.StatusOK, userJSON(x))
}

func (s *Server) putUser(w http.ResponseWriter, r *http.Request, u caller) {
	name := pv(r, "user")
	var body struct {
		Password         *string `json:"password"`
		PasswordHash     *string `json:"password_hash"`
		HashingAlgorithm string  `json:"hashing_algorithm"`
		Tags             any     `json:"tags"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeErr(w, err)
		return
	}
	old, existed := s.b.Meta().User(name)
	nu := meta.User{Name: name, PasswordHash: old.PasswordHash, HashingAlgorithm: "rabbit_password_hashing_sha256", Tags: tagsOf(body.Tags)}
	switch {
	case body.Password != nil:
		h, err := meta.HashPassword(*body.Password)
		if err != nil {
			writeErr(w, err)
			return
		}
		nu.PasswordHash = h
	case body.PasswordHash != nil:
		if body.HashingAlgorithm != "" && body.HashingAlgorithm != "rabbit_password_hashing_sha256" {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("unsupported hashing_algorithm '%s'", body.HashingAlgorithm))
			return
		}
		nu.PasswordHash = *body.PasswordHash
	case !existed:
		writeError(w, http.StatusBadRequest, "bad_request", "password or password_hash must be set")
		return
	}
	if err := s.b.Meta().PutUser(r.Context(), nu); err != nil {
		writeErr(w, err)
		return
	}
	if existed {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, u caller) {
	if err := s.b.Meta().DeleteUser(r.Context(), pv(r, "user")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listPermissions(w http.ResponseWriter, r *http.Request, u caller) {
	ps := s.b.Meta().Permissions()
	if ps == nil {
		ps = []meta.Permission{}
	}
	writeJSON(w, http.StatusOK, ps)
}

func (s *Server) getPermission(w http.ResponseWriter, r *http.Request, u caller) {
	p, ok := s.b.Meta().Permission(pathVhost(r, "vhost"), pv(r, "user"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) putPermission(w http.ResponseWriter, r *http.Request, u caller) {
	var p meta.Permission
	if err := decodeBody(r, &p); err != nil {
		writeErr(w, err)
		return
	}
	p.Vhost, p.User = pathVhost(r, "vhost"), pv(r, "user")
	_, existed := s.b.Meta().Permission(p.Vhost, p.User)
	if err := s.b.Meta().PutPermission(r.Context(), p); err != nil {
		writeErr(w, err)
		return
	}
	if existed {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

func (s *Server) deletePermission(w http.ResponseWriter, r *http.Request, u caller) {
	if err := s.b.Meta().DeletePermission(r.Context(), pathVhost(r, "vhost"), pv(r, "user")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request, u caller) {
	vh, _ := vhostFilter(r)
	ps := []meta.Policy{}
	for _, p := range s.b.Meta().Policies(vh) {
		if s.sees(u, p.Vhost) {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	writeJSON(w, http.StatusOK, ps)
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request, u caller) {
	vh, name := pathVhost(r, "vhost"), pv(r, "name")
	for _, p := range s.b.Meta().Policies(vh) {
		if p.Name == name {
			writeJSON(w, http.StatusOK, p)
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
}

func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request, u caller) {
	var p meta.Policy
	if err := decodeBody(r, &p); err != nil {
		writeErr(w, err)
		return
	}
	p.Vhost, p.Name = pathVhost(r, "vhost"), pv(r, "name")
	if p.Pattern == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "pattern must be set")
		return
	}
	if p.ApplyTo == "" {
		p.ApplyTo = "all"
	}
	p.Definition, _ = normalizeNumbers(p.Definition).(map[string]any)
	if err := s.b.Meta().PutPolicy(r.Context(), p); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request, u caller) {
	if err := s.b.Meta().DeletePolicy(r.Context(), pathVhost(r, "vhost"), pv(r, "name")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
