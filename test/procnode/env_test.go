package procnode

import (
	"context"
	"net/netip"
	"reflect"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	cases := map[string]string{
		"$(A)":           "1",
		"x$(A)y$(B)z":    "x1ytwoz",
		"$(C)":           "$(C)",
		"$$(A)":          "$(A)",
		"$$":             "$",
		"$(A":            "$(A",
		"a $ b":          "a $ b",
		"$(B)$(A)$(NOT)": "two1$(NOT)",
	}
	for in, want := range cases {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// A container's environment: envFrom first, then env in order with $(VAR) of earlier ones,
// field, Secret and ConfigMap references; the command and args expanded with it.
func TestContainerEnv(t *testing.T) {
	kube := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"token": []byte("t0k")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}, Data: map[string]string{"MODE": "fast"}},
	)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "x"}}}
	c := &corev1.Container{
		Name:    "main",
		Command: []string{"run", "--mode=$(MODE)"},
		Args:    []string{"$(WHO)@$(IP)"},
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		Env: []corev1.EnvVar{
			{Name: "WHO", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token"}}},
			{Name: "GREETING", Value: "hi $(WHO) in $(APP)"},
		},
	}
	env, err := containerEnv(context.Background(), envInputs{kube: kube, podIP: "10.0.0.5"}, pod, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"MODE=fast", "WHO=p", "IP=10.0.0.5", "APP=x", "TOKEN=t0k", "GREETING=hi p in x"}
	if !reflect.DeepEqual(env[:len(want)], want) {
		t.Errorf("env %q, want it to start with %q", env, want)
	}
	argv, err := command(c, env, nil)
	if err != nil || !reflect.DeepEqual(argv, []string{"run", "--mode=fast", "p@10.0.0.5"}) {
		t.Errorf("command %q (%v)", argv, err)
	}
	if _, err := command(&corev1.Container{Name: "empty"}, env, nil); err == nil {
		t.Error("a container with no command ran")
	}
}

// The DNS server answers A queries for the names it knows and NXDOMAIN for the others.
func TestDNSAnswer(t *testing.T) {
	addr := netip.MustParseAddr("10.250.0.7")
	resolve := func(name string) ([]netip.Addr, bool) {
		if name == "job-worker-0.job.ns.svc.cluster.local" {
			return []netip.Addr{addr}, true
		}
		return nil, false
	}
	query := func(name string) dnsmessage.Message {
		q, err := (&dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
			Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}}}).Pack()
		if err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(answer(q, resolve)); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := query("Job-Worker-0.job.ns.svc.cluster.local.")
	if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 || m.Answers[0].Body.(*dnsmessage.AResource).A != addr.As4() || m.ID != 7 {
		t.Errorf("answer %+v", m)
	}
	if m := query("example.com."); m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
		t.Errorf("answer for an outside name %+v", m)
	}
}
