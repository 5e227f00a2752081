package resource

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

func broker(mutate ...func(*warrenv1.Broker)) *warrenv1.Broker {
	b := &warrenv1.Broker{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: warrenv1.BrokerSpec{Replicas: ptr.To[int32](3)}}
	for _, m := range mutate {
		m(b)
	}
	return b
}

func TestBrokerConfigMergesSpecConfig(t *testing.T) {
	cases := []struct {
		name    string
		config  string
		want    []string
		wantErr error
	}{
		{"defaults", "", []string{"data_dir: /var/lib/warren", "loopback_users: []", "dns: w-nodes.ns.svc", "listen: :25672",
			"memory_high_watermark: 858993459"}, nil}, // 40% of the default 2Gi limit
		{"nested keys merge", `{"cluster": {"seeds": ["a:25672"]}, "limits": {"max_message_size": 1024}}`,
			[]string{"dns: w-nodes.ns.svc", "- a:25672", "max_message_size: 1024"}, nil},
		{"user overrides", `{"amqp": {"listen": ":5673"}, "limits": {"memory_high_watermark": 1000}}`, []string{"listen: :5673", "memory_high_watermark: 1000"}, nil},
		{"not an object", `[1, 2]`, nil, ErrInvalidSpec},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := broker(func(b *warrenv1.Broker) {
				if tc.config != "" {
					b.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(tc.config)}
				}
			})
			got, err := BrokerConfig(b, false)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("config lacks %q:\n%s", w, got)
				}
			}
			again, _ := BrokerConfig(b, false)
			if ConfigHash(again) != ConfigHash(got) {
				t.Error("rendering is not deterministic")
			}
		})
	}
}

func TestStatefulSetUpdateKeepsClaimTemplateAndAppliesOverride(t *testing.T) {
	b := broker(func(b *warrenv1.Broker) {
		b.Spec.Override.StatefulSet = &apiextensionsv1.JSON{Raw: []byte(`{"spec": {"template": {"spec": {"containers": [{"name": "warren", "env": [{"name": "EXTRA", "value": "1"}]}]}}}}`)}
	})
	bld := &StatefulSetBuilder{Broker: b, DefaultImage: "img", Replicas: 3, ConfigHash: "h"}
	obj, _ := bld.Build()
	if err := bld.Update(obj); err != nil {
		t.Fatal(err)
	}
	sts := obj.(*appsv1.StatefulSet)
	env := sts.Spec.Template.Spec.Containers[0].Env
	if env[len(env)-1].Name != "EXTRA" && env[0].Name != "EXTRA" {
		t.Errorf("override env not merged: %v", env)
	}
	if len(env) < 7 {
		t.Errorf("override replaced the operator's env instead of merging: %v", env)
	}
	// The claim template of an existing StatefulSet is immutable: kept.
	sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName = ptr.To("old")
	b.Spec.Persistence.StorageClassName = ptr.To("new")
	if err := bld.Update(sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "old" {
		t.Error("Update changed the immutable claim template")
	}

	b.Spec.Override.StatefulSet = &apiextensionsv1.JSON{Raw: []byte(`{"spec": {"replicas": "three"}}`)}
	if err := bld.Update(sts); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("bad override: err %v, want ErrInvalidSpec", err)
	}
}

func TestDefaultUserSecretGeneratedOnceThenKept(t *testing.T) {
	b := broker()
	bld := &DefaultUserSecretBuilder{Broker: b}
	obj, _ := bld.Build()
	if err := bld.Update(obj); err != nil {
		t.Fatal(err)
	}
	sec := obj.(*corev1.Secret)
	user, pass := string(sec.Data[KeyUsername]), string(sec.Data[KeyPassword])
	if user == "" || len(pass) != 24 {
		t.Fatalf("generated %q / %q", user, pass)
	}
	if err := bld.Update(sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data[KeyPassword]) != pass || string(sec.Data[KeyUsername]) != user {
		t.Error("credentials regenerated on update")
	}
	other, _ := bld.Build()
	_ = bld.Update(other)
	if string(other.(*corev1.Secret).Data[KeyPassword]) == pass {
		t.Error("two Brokers got the same password")
	}
}

func TestClientServiceKeepsNodePorts(t *testing.T) {
	b := broker(func(b *warrenv1.Broker) { b.Spec.Service.Type = corev1.ServiceTypeNodePort })
	bld := &ClientServiceBuilder{Broker: b}
	obj, _ := bld.Build()
	_ = bld.Update(obj)
	svc := obj.(*corev1.Service)
	svc.Spec.Ports[0].NodePort = 30672
	if err := bld.Update(svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].NodePort != 30672 {
		t.Error("allocated node port dropped")
	}
}

// The defaults only prefer spreading (so every replica schedules on a
// single-node cluster); what the user writes in spec.affinity and
// spec.topologySpreadConstraints, "required" included, is used as given.
func TestSchedulingDefaultsPreferAndUserRulesWin(t *testing.T) {
	required := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "w"}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	strict := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule}}
	cases := []struct {
		name         string
		broker       *warrenv1.Broker
		wantRequired bool
		wantSpread   corev1.UnsatisfiableConstraintAction
	}{
		{"defaults", broker(), false, corev1.ScheduleAnyway},
		{"user asks for required", broker(func(b *warrenv1.Broker) {
			b.Spec.Affinity = required
			b.Spec.TopologySpreadConstraints = strict
		}), true, corev1.DoNotSchedule},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := &StatefulSetBuilder{Broker: tc.broker, DefaultImage: "img", Replicas: 3}
			obj, _ := sb.Build()
			if err := sb.Update(obj); err != nil {
				t.Fatal(err)
			}
			pod := obj.(*appsv1.StatefulSet).Spec.Template.Spec
			aa := pod.Affinity.PodAntiAffinity
			if got := len(aa.RequiredDuringSchedulingIgnoredDuringExecution) > 0; got != tc.wantRequired {
				t.Errorf("required anti-affinity = %v, want %v", got, tc.wantRequired)
			}
			if !tc.wantRequired && len(aa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
				t.Error("no preferred anti-affinity by default")
			}
			if pod.Affinity.NodeAffinity != nil || pod.Affinity.PodAffinity != nil {
				t.Errorf("unexpected node or pod affinity: %+v", pod.Affinity)
			}
			if len(pod.TopologySpreadConstraints) == 0 {
				t.Fatal("no topology spread constraints")
			}
			for _, c := range pod.TopologySpreadConstraints {
				if c.WhenUnsatisfiable != tc.wantSpread {
					t.Errorf("spread on %s: %s, want %s", c.TopologyKey, c.WhenUnsatisfiable, tc.wantSpread)
				}
			}
		})
	}
}

// A node advertises its pod's IP (a restarted pod's new IP reaches its peers
// at once, a DNS record may be cached with the old one), bracketed when the
// cluster's primary family is IPv6; the preStop hook drains, its delay
// bounded by a short grace period.
func TestPodAdvertisesItsIPAndDrainsOnStop(t *testing.T) {
	for _, tc := range []struct {
		name      string
		family    corev1.IPFamily
		grace     *int64
		advertise string
		delay     string
	}{
		{"IPv4", corev1.IPv4Protocol, nil, "$(POD_IP):25672", "10s"},
		{"IPv6", corev1.IPv6Protocol, nil, "[$(POD_IP)]:25672", "10s"},
		{"short grace", corev1.IPv4Protocol, ptr.To[int64](20), "$(POD_IP):25672", "5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := broker(func(b *warrenv1.Broker) { b.Spec.TerminationGracePeriodSeconds = tc.grace })
			svc := &corev1.Service{Spec: corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{tc.family}}}
			sb := &StatefulSetBuilder{Broker: b, Replicas: 3, PodIPv6: PrimaryIPv6(svc)}
			obj, _ := sb.Build()
			if err := sb.Update(obj); err != nil {
				t.Fatal(err)
			}
			c := obj.(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0]
			env := map[string]corev1.EnvVar{}
			for _, e := range c.Env {
				env[e.Name] = e
			}
			if f := env["POD_IP"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "status.podIP" {
				t.Errorf("POD_IP %+v, want the downward API's status.podIP", env["POD_IP"])
			}
			if got := env["WARREN_CLUSTER_ADVERTISE"].Value; got != tc.advertise {
				t.Errorf("WARREN_CLUSTER_ADVERTISE %q, want %q", got, tc.advertise)
			}
			want := "/usr/local/bin/warren ctl drain --quiet --delay " + tc.delay
			if h := c.Lifecycle.PreStop; h == nil || h.Exec == nil || strings.Join(h.Exec.Command, " ") != want {
				t.Errorf("preStop %+v, want %q", h, want)
			}
		})
	}
}
