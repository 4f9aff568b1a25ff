package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// The pod-set limit is read from Kueue's Workload CRD as JSON, through the clientset the
// controller uses for built-in kinds, which asks for protobuf: an API server answers a CRD
// in protobuf to a client that prefers it, and the limit would be lost.
func TestKueuePodSetLimitFromTheCRD(t *testing.T) {
	for _, c := range []struct {
		name string
		max  int
		want int
	}{{"v0.19", 18, 18}, {"v0.16", 8, 8}} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/workloads.kueue.x-k8s.io" {
					http.NotFound(w, r)
					return
				}
				if strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
					_, _ = w.Write([]byte("k8s\x00protobuf"))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"spec":{"versions":[{"name":"v1beta1","schema":{"openAPIV3Schema":{"properties":{"spec":{"properties":{"podSets":{"maxItems":99}}}}}}},` +
					`{"name":"v1beta2","schema":{"openAPIV3Schema":{"properties":{"spec":{"properties":{"podSets":{"maxItems":` + map[int]string{18: "18", 8: "8"}[c.max] + `}}}}}}}]}}`))
			}))
			defer srv.Close()
			d := discovery.NewDiscoveryClientForConfigOrDie(protobuf(&rest.Config{Host: srv.URL}))
			if got := kueuePodSetLimit(context.Background(), d, klog.Background()); got != c.want {
				t.Errorf("limit %d, want the v1beta2 schema's %d", got, c.want)
			}
		})
	}
}
