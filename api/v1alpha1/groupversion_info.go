package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the Broker resource.
var GroupVersion = schema.GroupVersion{Group: "warrenmq.io", Version: "v1alpha1"}

// AddToScheme adds the types of this package to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Broker{}, &BrokerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
