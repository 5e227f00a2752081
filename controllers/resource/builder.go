package resource

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// ErrInvalidSpec wraps errors that come from the Broker's spec (a config or
// override that cannot be rendered): retrying cannot help, the user must
// change the spec.
var ErrInvalidSpec = errors.New("invalid spec")

// Builder builds one child of a Broker.
type Builder interface {
	// Build returns a new, empty child with its name and namespace set.
	Build() (client.Object, error)
	// Update sets every field the operator owns on obj, which Build
	// returned or the API server holds.
	Update(obj client.Object) error
}

// Options are the reconciler's decisions that the builders follow.
type Options struct {
	// DefaultImage is used when the Broker names no image.
	DefaultImage string
	// Replicas is the StatefulSet's replica count: spec.replicas, or the
	// current count while a scale-down is refused.
	Replicas int32
	// ConfigHash is the hash of the broker config file (see ConfigHash).
	ConfigHash string
	// ServiceMonitor adds the ServiceMonitor builder (its CRD exists and the
	// Broker enables it).
	ServiceMonitor bool
	// TLSCA: the spec.tls Secret has a ca.crt, so client certificates are
	// verified against it.
	TLSCA bool
}

// Builders returns the builders of a Broker's children, in creation order:
// what pods mount comes before the StatefulSet.
func Builders(b *warrenv1.Broker, o Options) []Builder {
	bs := []Builder{
		&ConfigMapBuilder{Broker: b, TLSCA: o.TLSCA},
		&DefaultUserSecretBuilder{Broker: b},
		&JoinSecretBuilder{Broker: b},
		&HeadlessServiceBuilder{Broker: b},
		&ClientServiceBuilder{Broker: b},
		&StatefulSetBuilder{Broker: b, DefaultImage: o.DefaultImage, Replicas: o.Replicas, ConfigHash: o.ConfigHash},
		&PodDisruptionBudgetBuilder{Broker: b},
	}
	if o.ServiceMonitor {
		bs = append(bs, &ServiceMonitorBuilder{Broker: b})
	}
	return bs
}
