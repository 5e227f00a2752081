package resource

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// PodDisruptionBudgetBuilder builds the PodDisruptionBudget that lets a
// voluntary disruption (node drain, upgrade) take one broker pod at a time,
// so a majority of an odd-sized cluster always stays up.
type PodDisruptionBudgetBuilder struct{ Broker *warrenv1.Broker }

// Build returns the empty PodDisruptionBudget.
func (p *PodDisruptionBudgetBuilder) Build() (client.Object, error) {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: PodDisruptionBudgetName(p.Broker), Namespace: p.Broker.Namespace}}, nil
}

// Update sets maxUnavailable 1 and the selector.
func (p *PodDisruptionBudgetBuilder) Update(obj client.Object) error {
	pdb := obj.(*policyv1.PodDisruptionBudget)
	pdb.Labels = mergeLabels(pdb.Labels, Labels(p.Broker))
	one := intstr.FromInt32(1)
	pdb.Spec.MaxUnavailable = &one
	pdb.Spec.MinAvailable = nil
	pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: SelectorLabels(p.Broker)}
	return nil
}
