package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions keep the manager's informers to the operator's own objects:
// children carry app.kubernetes.io/managed-by=warren-operator and PVCs
// app.kubernetes.io/name=warren, so the operator does not hold every
// ConfigMap, Secret, Service or PVC of the cluster in memory. Secrets are
// read from the API server, not the cache, so that a default-user Secret a
// user created before the Broker (without the label) is found.
func CacheOptions(opts cache.Options) (cache.Options, client.Options) {
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "warren-operator"})}
	opts.ByObject = map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:             managed,
		&corev1.Secret{}:                managed,
		&corev1.Service{}:               managed,
		&appsv1.StatefulSet{}:           managed,
		&policyv1.PodDisruptionBudget{}: managed,
		&corev1.PersistentVolumeClaim{}: {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "warren"})},
		&corev1.Pod{}:                   {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "warren"})},
	}
	return opts, client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}
