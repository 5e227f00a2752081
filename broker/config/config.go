package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/warrenmq/warren/broker/procsched"
)

// Config is the whole broker configuration. Field names in YAML use snake_case.
type Config struct {
	// DataDir holds every file the broker writes (metadata, queues, streams).
	DataDir string `json:"data_dir"`
	// LogLevel is one of debug, info, warn, error.
	LogLevel string `json:"log_level"`

	AMQP       AMQP       `json:"amqp"`
	Stream     Stream     `json:"stream"`
	TLS        TLS        `json:"tls"`
	HTTP       HTTP       `json:"http"`
	Prometheus Prometheus `json:"prometheus"`
	Auth       Auth       `json:"auth"`
	Limits     Limits     `json:"limits"`
	Storage    Storage    `json:"storage"`
	Cluster    Cluster    `json:"cluster"`
	Debug      Debug      `json:"debug"`
	Process    Process    `json:"process"`
}

// AMQP configures the AMQP 0.9.1 listener.
type AMQP struct {
	Listen string `json:"listen"`
	// TLSListen, when set (conventionally ":5671"), serves AMQP over TLS
	// there with the certificate of the tls section.
	TLSListen  string        `json:"tls_listen"`
	FrameMax   uint32        `json:"frame_max"`
	ChannelMax uint16        `json:"channel_max"`
	Heartbeat  time.Duration `json:"heartbeat"`
	// HandshakeTimeout bounds the time from TCP accept to connection.open.
	HandshakeTimeout time.Duration `json:"handshake_timeout"`
	// BusyPoll is how long a connection's reader spins on its socket for
	// the client's ack when one of its consumers of a queue on this node
	// ran out of credit, before it sleeps until the socket is readable: a
	// consumer's next batch goes out without the reader's wake-up
	// latency. At most half the processors spin at once; 0 turns it off.
	BusyPoll time.Duration `json:"busy_poll"`
	// OutputBufferLimit bounds the bytes a connection holds for its
	// client's socket: over it, the connection stops reading the client's
	// frames (its confirms, returns and replies stop growing; TCP pushes
	// back on the client) until the client has read half of them.
	OutputBufferLimit int64 `json:"output_buffer_limit"`
}

// Stream configures the RabbitMQ stream protocol listener.
type Stream struct {
	Listen string `json:"listen"`
	// TLSListen, when set (conventionally ":5551"), serves the stream
	// protocol over TLS there with the certificate of the tls section.
	TLSListen string `json:"tls_listen"`
	// AdvertisedTLSPort is returned in metadata on TLS connections; 0 means
	// the TLS listener's port.
	AdvertisedTLSPort int `json:"advertised_tls_port"`
	// AdvertisedHost and AdvertisedPort are returned in metadata responses;
	// empty host means the node's hostname.
	AdvertisedHost string        `json:"advertised_host"`
	AdvertisedPort int           `json:"advertised_port"`
	FrameMax       uint32        `json:"frame_max"`
	Heartbeat      time.Duration `json:"heartbeat"`
	// InitialFrameMax bounds frames before open succeeds (RabbitMQ's
	// stream.initial_frame_max): an unauthenticated client cannot make
	// the node buffer more.
	InitialFrameMax uint32 `json:"initial_frame_max"`
}

// HTTP configures the management API listener. Its timeouts also bound
// the metrics and pprof listeners.
type HTTP struct {
	Listen string `json:"listen"`
	// ReadHeaderTimeout bounds the time to send a request's headers.
	ReadHeaderTimeout time.Duration `json:"read_header_timeout"`
	// ReadTimeout bounds the time to send a whole request, body included.
	ReadTimeout time.Duration `json:"read_timeout"`
	// WriteTimeout bounds the time from a request's headers to the end of
	// its response.
	WriteTimeout time.Duration `json:"write_timeout"`
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// MaxConnections is how many connections the API's listener holds
	// open at once; one more is answered 503 and closed.
	MaxConnections int `json:"max_connections"`
	// CollectStatisticsInterval is how often the API samples the node's
	// counters for the rates in message_stats and churn_rates (RabbitMQ's
	// collect_statistics_interval).
	CollectStatisticsInterval time.Duration `json:"collect_statistics_interval"`
}

// Prometheus configures the metrics listener.
type Prometheus struct {
	Listen string `json:"listen"`
	// MaxConnections is how many connections the metrics listener (and
	// the pprof one) holds open at once; one more is answered 503 and
	// closed.
	MaxConnections int `json:"max_connections"`
}

// Auth configures the default user and vhost created on first start.
type Auth struct {
	DefaultUser  string `json:"default_user"`
	DefaultPass  string `json:"default_pass"`
	DefaultVhost string `json:"default_vhost"`
	// LoopbackUsers may only connect from a loopback address (as RabbitMQ's
	// loopback_users; guest by default).
	LoopbackUsers []string `json:"loopback_users"`
}

// Limits protects the node from clients.
type Limits struct {
	MaxMessageSize int64 `json:"max_message_size"`
	// MemoryHighWatermark in bytes of heap; above it publishers are blocked.
	// 0 means 40% of system memory.
	MemoryHighWatermark int64 `json:"memory_high_watermark"`
	// DiskFreeLimit in bytes; below it publishers are blocked.
	DiskFreeLimit int64 `json:"disk_free_limit"`
}

// Storage holds node-wide defaults for the per-vhost storage policies.
type Storage struct {
	QueueVersion         int  `json:"queue_version"`
	EmbedMessagesBelow   int  `json:"embed_messages_below"`
	StreamReadAhead      bool `json:"stream_read_ahead"`
	StreamReadAheadLimit int  `json:"stream_read_ahead_limit"`
	// QueueMemoryMessages bounds how many messages a classic queue keeps in
	// memory; the rest is read back from disk on demand.
	QueueMemoryMessages int `json:"queue_memory_messages"`
	// SyncInterval is the longest a confirm waits for a group-commit fsync.
	SyncInterval time.Duration `json:"sync_interval"`
}

// Process configures how the operating system runs the broker's process.
type Process struct {
	// SchedPolicy is the Linux scheduling policy of the broker's threads:
	// "batch" (SCHED_BATCH, the default) or "normal" (SCHED_OTHER). Both
	// get the same share of the CPUs; under batch a broker thread woken by
	// a socket or by another broker thread does not preempt the thread
	// running on that CPU but takes an idle one or waits for the running
	// thread's slice, so the broker's threads and, on a shared machine,
	// its clients' are interrupted less. Threads under another policy
	// (started under chrt, say) keep theirs. Ignored (with a warning) where
	// the system refuses it.
	SchedPolicy string `json:"sched_policy"`
	// GCMinHeapGrowth is how much the heap may grow (garbage) before Go
	// collects it, at least: with a small live heap Go's GOGC=100 alone
	// collects many times a second under load (see package gctune). 0
	// leaves Go's GOGC alone. At most a quarter of the memory high
	// watermark is used.
	GCMinHeapGrowth int64 `json:"gc_min_heap_growth"`
}

// Debug holds settings for diagnosing a running node.
type Debug struct {
	// PprofListen, when set (e.g. "127.0.0.1:6060"), serves Go's
	// net/http/pprof profiles there. Off by default: profiles expose
	// internals, so bind it to loopback.
	PprofListen string `json:"pprof_listen"`
}

// Default returns the embedded defaults: what `make run` uses.
func Default() Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return Config{
		DataDir:  "./data",
		LogLevel: "info",
		AMQP: AMQP{
			Listen:            ":5672",
			FrameMax:          131072,
			ChannelMax:        2047,
			Heartbeat:         60 * time.Second,
			HandshakeTimeout:  10 * time.Second,
			BusyPoll:          50 * time.Microsecond,
			OutputBufferLimit: 4 << 20,
		},
		Stream: Stream{
			Listen:          ":5552",
			FrameMax:        1048576,
			Heartbeat:       60 * time.Second,
			InitialFrameMax: 8192,
		},
		HTTP: HTTP{
			Listen:            ":15672",
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxConnections:    256,

			CollectStatisticsInterval: 5 * time.Second,
		},
		Prometheus: Prometheus{Listen: ":15692", MaxConnections: 64},
		Auth: Auth{
			DefaultUser:   "guest",
			DefaultPass:   "guest",
			DefaultVhost:  "/",
			LoopbackUsers: []string{"guest"},
		},
		Limits: Limits{
			MaxMessageSize: 128 << 20,
			DiskFreeLimit:  50 << 20,
		},
		Storage: Storage{
			QueueVersion:         2,
			EmbedMessagesBelow:   4096,
			StreamReadAhead:      true,
			StreamReadAheadLimit: 4096,
			QueueMemoryMessages:  2048,
			SyncInterval:         2 * time.Millisecond,
		},
		Cluster: Cluster{NodeName: "warren@" + host, Listen: ":25672", MetadataWriteTimeout: 30 * time.Second},
		Process: Process{SchedPolicy: "batch", GCMinHeapGrowth: 32 << 20},
	}
}

// Load returns Default() overlaid with the YAML file at path (if path is not
// empty) and then with WARREN_* environment variables from environ.
func Load(path string, environ []string) (Config, error) {
	cfg := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: read %s: %w", path, err)
		}
		if err := unmarshalYAML(data, &cfg); err != nil {
			return cfg, fmt.Errorf("config: parse %s: %w", path, err)
		}
	}
	if err := ApplyEnv(&cfg, environ); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// ApplyEnv sets fields from WARREN_<SECTION>_<FIELD> variables, e.g.
// WARREN_DATA_DIR, WARREN_AMQP_LISTEN, WARREN_STORAGE_QUEUE_VERSION.
// List fields take comma-separated values.
func ApplyEnv(cfg *Config, environ []string) error {
	vars := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, "WARREN_") {
			vars[strings.TrimPrefix(k, "WARREN_")] = v
		}
	}
	if len(vars) == 0 {
		return nil
	}
	var errs []error
	walkFields(reflect.ValueOf(cfg).Elem(), "", func(key string, f reflect.Value) {
		v, ok := vars[strings.ToUpper(key)]
		if !ok {
			return
		}
		if err := setField(f, v); err != nil {
			errs = append(errs, fmt.Errorf("config: WARREN_%s: %w", strings.ToUpper(key), err))
		}
	})
	return errors.Join(errs...)
}

// Set assigns one setting by its dotted YAML key (e.g. "amqp.listen"); it
// backs the --set flag of `warren serve`.
func Set(cfg *Config, key, value string) error {
	found := false
	var err error
	walkFields(reflect.ValueOf(cfg).Elem(), "", func(k string, f reflect.Value) {
		if strings.ReplaceAll(k, "_", ".") == strings.ReplaceAll(key, "_", ".") || k == key {
			found = true
			err = setField(f, value)
		}
	})
	if !found {
		return fmt.Errorf("config: unknown setting %q", key)
	}
	if err != nil {
		return fmt.Errorf("config: %s: %w", key, err)
	}
	return nil
}

func walkFields(v reflect.Value, prefix string, fn func(key string, f reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		key := name
		if prefix != "" {
			key = prefix + "_" + name
		}
		f := v.Field(i)
		if f.Kind() == reflect.Struct {
			walkFields(f, key, fn)
			continue
		}
		fn(key, f)
	}
}

func setField(f reflect.Value, v string) error {
	switch f.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	case []string:
		var parts []string
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.Set(reflect.ValueOf(parts))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(v)
	case reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return err
		}
		f.SetUint(n)
	default:
		return fmt.Errorf("unsupported kind %s", f.Kind())
	}
	return nil
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	if c.AMQP.FrameMax != 0 && c.AMQP.FrameMax < 4096 {
		bad("amqp.frame_max", "must be at least 4096, got %d", c.AMQP.FrameMax)
	}
	if c.AMQP.OutputBufferLimit < 64<<10 || c.AMQP.OutputBufferLimit > 1<<30 {
		bad("amqp.output_buffer_limit", "must be between 65536 and 1073741824, got %d", c.AMQP.OutputBufferLimit)
	}
	if c.Stream.InitialFrameMax != 0 && (c.Stream.InitialFrameMax < 1024 || c.Stream.InitialFrameMax > 1<<20) {
		bad("stream.initial_frame_max", "must be between 1024 and 1 MiB, got %d", c.Stream.InitialFrameMax)
	}
	if c.Storage.QueueVersion != 1 && c.Storage.QueueVersion != 2 {
		bad("storage.queue_version", "must be 1 or 2, got %d", c.Storage.QueueVersion)
	}
	if c.Storage.EmbedMessagesBelow < 0 {
		bad("storage.embed_messages_below", "must not be negative")
	}
	if c.Storage.StreamReadAheadLimit < 0 || c.Storage.StreamReadAheadLimit > 1<<30 {
		bad("storage.stream_read_ahead_limit", "must be between 0 and 1 GiB")
	}
	if c.Storage.QueueMemoryMessages < 1 {
		bad("storage.queue_memory_messages", "must be at least 1")
	}
	if c.Limits.MaxMessageSize <= 0 || c.Limits.MaxMessageSize > 512<<20 {
		bad("limits.max_message_size", "must be between 1 and 536870912")
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{
		{"http.read_header_timeout", c.HTTP.ReadHeaderTimeout}, {"http.read_timeout", c.HTTP.ReadTimeout},
		{"http.write_timeout", c.HTTP.WriteTimeout}, {"http.idle_timeout", c.HTTP.IdleTimeout},
	} {
		if t.d <= 0 {
			bad(t.key, "must be positive, got %v", t.d)
		}
	}
	if d := c.HTTP.CollectStatisticsInterval; d < 100*time.Millisecond || d > time.Hour {
		bad("http.collect_statistics_interval", "must be between 100ms and 1h, got %v", d)
	}
	if c.HTTP.MaxConnections < 1 {
		bad("http.max_connections", "must be at least 1, got %d", c.HTTP.MaxConnections)
	}
	if c.Prometheus.MaxConnections < 1 {
		bad("prometheus.max_connections", "must be at least 1, got %d", c.Prometheus.MaxConnections)
	}
	errs = append(errs, c.validateTLS()...)
	errs = append(errs, c.validateCluster()...)
	if c.Auth.DefaultVhost == "" {
		bad("auth.default_vhost", "must not be empty")
	}
	if _, err := procsched.ParsePolicy(c.Process.SchedPolicy); err != nil {
		bad("process.sched_policy", "must be normal or batch, got %q", c.Process.SchedPolicy)
	}
	if c.Process.GCMinHeapGrowth < 0 {
		bad("process.gc_min_heap_growth", "must be 0 (Go's GOGC alone) or a number of bytes, got %d", c.Process.GCMinHeapGrowth)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	return errors.Join(errs...)
}

// Path joins elems under the data directory.
func (c Config) Path(elems ...string) string {
	return filepath.Join(append([]string{c.DataDir}, elems...)...)
}

// unmarshalYAML decodes a config file strictly (unknown keys are errors),
// accepting durations written as strings such as "30s".
func unmarshalYAML(data []byte, cfg *Config) error {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return err
	}
	if err := parseDurations(raw, reflect.TypeOf(*cfg), ""); err != nil {
		return err
	}
	js, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(cfg)
}

// parseDurations replaces duration strings in m with nanoseconds, following
// the struct type t.
func parseDurations(m map[string]any, t reflect.Type, prefix string) error {
	durType := reflect.TypeOf(time.Duration(0))
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		v, ok := m[name]
		if !ok {
			continue
		}
		switch {
		case f.Type == durType:
			if s, ok := v.(string); ok {
				d, err := time.ParseDuration(s)
				if err != nil {
					return fmt.Errorf("%s%s: %w", prefix, name, err)
				}
				m[name] = int64(d)
			}
		case f.Type.Kind() == reflect.Struct:
			if sub, ok := v.(map[string]any); ok {
				if err := parseDurations(sub, f.Type, prefix+name+"."); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
