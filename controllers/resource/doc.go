// Package resource builds the children of a Broker: one builder per child
// (ConfigMap, default-user Secret, cluster join Secret, headless Service,
// client Service, StatefulSet, PodDisruptionBudget, ServiceMonitor), after
// rabbitmq's cluster-operator. Build returns a new object with its name and
// namespace; Update sets every field the operator owns on an existing (or
// freshly built) object and leaves the rest (fields the API server defaulted,
// generated credentials, immutable fields) as they are, so Update is
// idempotent and suits controllerutil.CreateOrUpdate. Builders are pure: they
// read the Broker and never call the API server. Owner references are set by
// the reconciler.
package resource
