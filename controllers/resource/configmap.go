package resource

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// ConfigMapBuilder builds the ConfigMap holding the broker config file.
type ConfigMapBuilder struct {
	Broker *warrenv1.Broker
	// TLSCA: the spec.tls Secret has a ca.crt (see BrokerConfig).
	TLSCA bool
}

// Build returns the empty ConfigMap.
func (c *ConfigMapBuilder) Build() (client.Object, error) {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(c.Broker), Namespace: c.Broker.Namespace}}, nil
}

// Update writes the config file.
func (c *ConfigMapBuilder) Update(obj client.Object) error {
	cm := obj.(*corev1.ConfigMap)
	cfg, err := BrokerConfig(c.Broker, c.TLSCA)
	if err != nil {
		return err
	}
	cm.Labels = mergeLabels(cm.Labels, Labels(c.Broker))
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[ConfigFile] = cfg
	return nil
}

// BrokerConfig renders the node's config file (docs/configuration.md):
// the listeners, the data directory, cluster discovery through the headless
// Service, no loopback-only users (the default user comes from a Secret),
// the memory alarm at 40% of the container's memory limit, with spec.tls
// the TLS listeners on 5671 and 5551 and the mounted certificate (and
// tls.ca_file when tlsCA: the Secret has a ca.crt), then spec.config
// merged over it. Per-node values (node name, advertised
// host) and secrets (default user, join token) come from the environment
// (WARREN_* variables set by the StatefulSet), not from this file, so the
// file is the same on every node and its hash changes only with the spec.
func BrokerConfig(b *warrenv1.Broker, tlsCA bool) (string, error) {
	cfg := map[string]any{
		"data_dir":   DataDir,
		"amqp":       map[string]any{"listen": fmt.Sprintf(":%d", PortAMQP)},
		"stream":     map[string]any{"listen": fmt.Sprintf(":%d", PortStream)},
		"http":       map[string]any{"listen": fmt.Sprintf(":%d", PortHTTP)},
		"prometheus": map[string]any{"listen": fmt.Sprintf(":%d", PortPrometheus)},
		"auth":       map[string]any{"loopback_users": []string{}},
		// Peers are found through the headless Service's records; the
		// first pod is the seed every node waits for, so it alone forms
		// the cluster and the others join it, whatever order DNS shows
		// them in (membership forms only once every seed answered).
		"cluster": map[string]any{
			"listen": fmt.Sprintf(":%d", PortCluster),
			"dns":    HeadlessHost(b),
			"seeds":  []string{fmt.Sprintf("%s-0.%s:%d", StatefulSetName(b), HeadlessHost(b), PortCluster)},
		},
	}
	if b.Spec.TLS != nil {
		cfg["amqp"].(map[string]any)["tls_listen"] = fmt.Sprintf(":%d", PortAMQPS)
		cfg["stream"].(map[string]any)["tls_listen"] = fmt.Sprintf(":%d", PortStreamTLS)
		t := map[string]any{
			"cert_file": path.Join(TLSDir, KeyTLSCert),
			"key_file":  path.Join(TLSDir, KeyTLSKey),
		}
		if tlsCA {
			t["ca_file"] = path.Join(TLSDir, KeyTLSCA)
		}
		cfg["tls"] = t
	}
	// The broker's memory alarm defaults to 40% of the host's RAM; in a pod
	// the limit is what counts, so the alarm goes off at 40% of it, before
	// the kernel's OOM killer would act.
	if limit, ok := ContainerResources(b).Limits[corev1.ResourceMemory]; ok && !limit.IsZero() {
		cfg["limits"] = map[string]any{"memory_high_watermark": limit.Value() * 4 / 10}
	}
	if b.Spec.Config != nil && len(b.Spec.Config.Raw) > 0 {
		var extra map[string]any
		if err := json.Unmarshal(b.Spec.Config.Raw, &extra); err != nil {
			return "", fmt.Errorf("%w: spec.config: %v", ErrInvalidSpec, err)
		}
		mergeMaps(cfg, extra)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("render broker config: %w", err)
	}
	return "# Written by warren-operator from Broker " + b.Namespace + "/" + b.Name + "; edit the Broker, not this.\n" + string(out), nil
}

// ConfigHash is the hash put on the pod template for a rendered config.
func ConfigHash(config string) string {
	h := sha256.Sum256([]byte(config))
	return hex.EncodeToString(h[:8])
}

// mergeMaps merges src into dst, recursing into maps present in both.
func mergeMaps(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeMaps(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}
