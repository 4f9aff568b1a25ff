package procnode

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The Services' variables: the API server's always, the namespace's with a cluster IP unless
// the pod turns service links off; Docker's link variables per port.
func TestServiceEnv(t *testing.T) {
	svc := func(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	all := []*corev1.Service{
		svc("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		svc("ns", "my-web", "10.96.3.4", corev1.ServicePort{Port: 80}, corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP}),
		svc("ns", "headless", "None", corev1.ServicePort{Port: 80}),
		svc("other", "elsewhere", "10.96.9.9", corev1.ServicePort{Port: 80}),
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}
	want := []string{
		"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_PORT_443_TCP_PORT=443", "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
		"MY_WEB_SERVICE_HOST=10.96.3.4", "MY_WEB_SERVICE_PORT=80", "MY_WEB_SERVICE_PORT_DNS_UDP=53",
		"MY_WEB_PORT=tcp://10.96.3.4:80", "MY_WEB_PORT_80_TCP=tcp://10.96.3.4:80", "MY_WEB_PORT_80_TCP_PROTO=tcp",
		"MY_WEB_PORT_80_TCP_PORT=80", "MY_WEB_PORT_80_TCP_ADDR=10.96.3.4",
		"MY_WEB_PORT_53_UDP=udp://10.96.3.4:53", "MY_WEB_PORT_53_UDP_PROTO=udp", "MY_WEB_PORT_53_UDP_PORT=53", "MY_WEB_PORT_53_UDP_ADDR=10.96.3.4",
	}
	if got := serviceEnv(all, pod); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	pod.Spec.EnableServiceLinks = ptr.To(false)
	if got := serviceEnv(all, pod); !reflect.DeepEqual(got, want[:8]) {
		t.Errorf("without service links: %q", got)
	}
}
