package controllers

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// The API server refuses invalid Brokers with a message naming the field;
// the rules are the CRD's markers and CEL, so this runs against the real
// kube-apiserver.
func TestInvalidBrokersRejected(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	create := []struct {
		name   string
		mutate func(*warrenv1.Broker)
		want   string
	}{
		{"even replicas", func(b *warrenv1.Broker) { b.Spec.Replicas = ptr.To[int32](2) }, "replicas must be odd"},
		{"zero replicas", func(b *warrenv1.Broker) { b.Spec.Replicas = ptr.To[int32](0) }, "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"},
		{"queue version 3", func(b *warrenv1.Broker) {
			b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: "/", Storage: warrenv1.VhostStorage{QueueVersion: ptr.To[int32](3)}}}
		}, `spec.vhosts[0].storage.queueVersion: Unsupported value: 3: supported values: "1", "2"`},
		{"duplicate vhost names", func(b *warrenv1.Broker) {
			b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: "orders"}, {Name: "orders"}}
		}, "spec.vhosts[1]: Duplicate value"},
		{"read-ahead limit 0", func(b *warrenv1.Broker) {
			b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: "s", Storage: warrenv1.VhostStorage{StreamReadAheadLimit: ptr.To[int32](0)}}}
		}, "spec.vhosts[0].storage.streamReadAheadLimit: Invalid value: 0"},
		{"read-ahead limit above 16 MiB", func(b *warrenv1.Broker) {
			b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: "s", Storage: warrenv1.VhostStorage{StreamReadAheadLimit: ptr.To[int32](1 << 25)}}}
		}, "should be less than or equal to 16777216"},
		{"unknown default queue type", func(b *warrenv1.Broker) {
			b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: "l", DefaultQueueType: "lazy"}}
		}, `spec.vhosts[0].defaultQueueType: Unsupported value: "lazy"`},
		{"empty vhost name", func(b *warrenv1.Broker) {
			b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: ""}}
		}, "spec.vhosts[0].name"},
		{"bad service type", func(b *warrenv1.Broker) { b.Spec.Service.Type = "ExternalName" }, `spec.service.type: Unsupported value: "ExternalName"`},
	}
	for i, tc := range create {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(ns, "invalid-"+string(rune('a'+i)), tc.mutate)
			err := testClient.Create(ctx, b)
			if err == nil {
				t.Fatalf("created; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}

	update := []struct {
		name   string
		mutate func(*warrenv1.Broker)
		want   string
	}{
		{"change the storage class", func(b *warrenv1.Broker) { b.Spec.Persistence.StorageClassName = ptr.To("slow") }, "persistence.storageClassName is immutable"},
		{"remove the storage class", func(b *warrenv1.Broker) { b.Spec.Persistence.StorageClassName = nil }, "persistence.storageClassName is immutable"},
		{"shrink the volume", func(b *warrenv1.Broker) { b.Spec.Persistence.Size = resource.MustParse("5Gi") }, "persistence.size may grow but never shrink"},
		{"even replicas", func(b *warrenv1.Broker) { b.Spec.Replicas = ptr.To[int32](4) }, "replicas must be odd"},
	}
	base := newBroker(ns, "immutable", func(b *warrenv1.Broker) {
		b.Spec.Persistence.StorageClassName = ptr.To("fast")
		b.Spec.Persistence.Size = resource.MustParse("10Gi")
		b.Annotations = map[string]string{warrenv1.PausedAnnotation: "true"} // keep the operator out of the way
	})
	createBroker(t, base)
	for _, tc := range update {
		t.Run("update: "+tc.name, func(t *testing.T) {
			var err error
			for range 50 { // the operator may update the Broker meanwhile (finalizer)
				b := &warrenv1.Broker{}
				if err := testClient.Get(ctx, clientKey(base), b); err != nil {
					t.Fatal(err)
				}
				tc.mutate(b)
				if err = testClient.Update(ctx, b); !apierrors.IsConflict(err) {
					break
				}
			}
			if err == nil {
				t.Fatalf("updated; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
	// Growing the volume is allowed.
	updateBroker(t, base, func(b *warrenv1.Broker) { b.Spec.Persistence.Size = resource.MustParse("15Gi") })
}
