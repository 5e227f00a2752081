package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/broker/config"
	res "github.com/warrenmq/warren/controllers/resource"
)

// TestTLSSecretMountedAndListenersConfigured: spec.tls.secretName naming a
// Secret that does not exist yet is reported (TLSSecretInvalid); once the
// kubernetes.io/tls Secret exists, the pods mount it read-only, expose
// amqps 5671 and stream-tls 5551 (container and client Service), and the
// broker config, as the broker itself loads it, has the TLS listeners and
// files, with the CA when the Secret has ca.crt.
func TestTLSSecretMountedAndListenersConfigured(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	b := newBroker(ns, "secure", func(b *warrenv1.Broker) {
		b.Spec.TLS = &warrenv1.TLSSpec{SecretName: "secure-tls"}
	})
	createBroker(t, b)
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionFalse, warrenv1.ReasonTLSSecretInvalid)
	eventFor(t, b, warrenv1.ReasonTLSSecretInvalid, "secure-tls not found")

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure-tls"},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": []byte("-----BEGIN CERTIFICATE-----\n"),
			"tls.key": []byte("-----BEGIN PRIVATE KEY-----\n"),
			"ca.crt":  []byte("-----BEGIN CERTIFICATE-----\n"),
		},
	}
	if err := testClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
	eventually(t, 10*time.Second, "TLS endpoints in status", func() error {
		if err := getObj(b); err != nil {
			return err
		}
		e := b.Status.Endpoints
		if e == nil || e.AMQPS != "amqps://secure."+ns+".svc:5671" || e.StreamTLS != "rabbitmq-stream+tls://secure."+ns+".svc:5551" {
			return fmt.Errorf("endpoints %+v", e)
		}
		return nil
	})

	sts := statefulSetOf(t, b)
	pod := sts.Spec.Template.Spec
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == res.TLSVolumeName {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != "secure-tls" {
		t.Fatalf("no volume of Secret secure-tls: %+v", pod.Volumes)
	}
	c := pod.Containers[0]
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == res.TLSVolumeName && m.MountPath == "/etc/warren/tls" && m.ReadOnly {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("TLS Secret not mounted read-only at /etc/warren/tls: %+v", c.VolumeMounts)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["amqps"] != 5671 || ports["stream-tls"] != 5551 || ports["amqp"] != 5672 {
		t.Errorf("container ports: %v", ports)
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: res.ClientServiceName(b)}}
	eventually(t, 10*time.Second, "client Service", func() error { return getObj(svc) })
	sports := map[string]string{}
	for _, p := range svc.Spec.Ports {
		sports[p.Name] = fmt.Sprintf("%d->%s", p.Port, p.TargetPort.String())
	}
	if sports["amqps"] != "5671->amqps" || sports["stream-tls"] != "5551->stream-tls" {
		t.Errorf("client Service ports: %v", sports)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: res.ConfigMapName(b)}}
	eventually(t, 10*time.Second, "ConfigMap", func() error { return getObj(cm) })
	file := filepath.Join(t.TempDir(), "warren.yaml")
	if err := os.WriteFile(file, []byte(cm.Data[res.ConfigFile]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, nil)
	if err != nil {
		t.Fatalf("the broker cannot load the operator's config: %v\n%s", err, cm.Data[res.ConfigFile])
	}
	want := config.TLS{CertFile: "/etc/warren/tls/tls.crt", KeyFile: "/etc/warren/tls/tls.key", CAFile: "/etc/warren/tls/ca.crt"}
	if cfg.TLS != want || cfg.AMQP.TLSListen != ":5671" || cfg.Stream.TLSListen != ":5551" || cfg.AMQP.Listen != ":5672" {
		t.Errorf("broker config: tls %+v, amqp.tls_listen %q, stream.tls_listen %q, amqp.listen %q",
			cfg.TLS, cfg.AMQP.TLSListen, cfg.Stream.TLSListen, cfg.AMQP.Listen)
	}

	// Without spec.tls, none of it.
	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.TLS = nil })
	eventually(t, 20*time.Second, "TLS removed from the StatefulSet", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == res.TLSVolumeName {
				return fmt.Errorf("volume %s still there", v.Name)
			}
		}
		for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
			if p.Name == "amqps" {
				return fmt.Errorf("port amqps still there")
			}
		}
		return nil
	})
}
