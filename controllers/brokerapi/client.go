package brokerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrNotFound is returned when the broker has no such object.
var ErrNotFound = errors.New("brokerapi: not found")

// Client calls one Warren node's HTTP API.
type Client struct {
	// BaseURL is the node's API root, for example http://warren.default.svc:15672.
	BaseURL string
	// Username and Password authenticate every call (HTTP basic auth).
	Username, Password string
	// HTTP is the underlying client; nil means a client with a 10 s timeout.
	HTTP *http.Client
}

// Storage is a vhost's storage policy as the HTTP API names it. Zero values
// mean the node's defaults.
type Storage struct {
	QueueVersion         int   `json:"queue-version,omitempty"`
	EmbedMessagesBelow   int   `json:"embed-messages-below,omitempty"`
	StreamReadAhead      *bool `json:"stream-read-ahead,omitempty"`
	StreamReadAheadLimit int   `json:"stream-read-ahead-limit,omitempty"`
}

// Equal reports whether two policies are the same.
func (s Storage) Equal(o Storage) bool {
	if (s.StreamReadAhead == nil) != (o.StreamReadAhead == nil) {
		return false
	}
	if s.StreamReadAhead != nil && *s.StreamReadAhead != *o.StreamReadAhead {
		return false
	}
	return s.QueueVersion == o.QueueVersion && s.EmbedMessagesBelow == o.EmbedMessagesBelow &&
		s.StreamReadAheadLimit == o.StreamReadAheadLimit
}

// Vhost is the part of a vhost the operator manages.
type Vhost struct {
	Name             string  `json:"name"`
	DefaultQueueType string  `json:"default_queue_type,omitempty"`
	Storage          Storage `json:"storage"`
}

// Vhost returns the vhost named name, or ErrNotFound.
func (c *Client) Vhost(ctx context.Context, name string) (Vhost, error) {
	var v Vhost
	err := c.do(ctx, http.MethodGet, "/api/vhosts/"+url.PathEscape(name), nil, &v)
	return v, err
}

// PutVhost creates the vhost or replaces its default queue type and storage
// policy. A running node applies the change at once.
func (c *Client) PutVhost(ctx context.Context, v Vhost) error {
	body := map[string]any{"storage": v.Storage}
	if v.DefaultQueueType != "" {
		body["default_queue_type"] = v.DefaultQueueType
	}
	return c.do(ctx, http.MethodPut, "/api/vhosts/"+url.PathEscape(v.Name), body, nil)
}

// Ready reports whether the node answers its readiness check.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/api/health/checks/ready", nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("brokerapi: %s %s: encode: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("brokerapi: %s %s: %w", method, path, err)
	}
	req.SetBasicAuth(c.Username, c.Password)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("brokerapi: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("brokerapi: %s %s: read: %w", method, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s %s", ErrNotFound, method, path)
	case resp.StatusCode >= 300:
		var e struct {
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Reason == "" {
			e.Reason = strings.TrimSpace(string(data))
		}
		return fmt.Errorf("brokerapi: %s %s: %s: %s", method, path, resp.Status, e.Reason)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("brokerapi: %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}
