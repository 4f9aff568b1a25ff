package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned/fake"
	jobinformers "github.com/t9k-jobs/t9k-jobs/pkg/client/informers/externalversions"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
)

// kinds is every kind the controller runs, as main registers them.
func kinds() []engine.Adapter {
	jobs := fake.NewClientset()
	return adapters(jobs, jobinformers.NewSharedInformerFactory(jobs, 0))
}

// served makes the fake discovery serve these kinds of batch.tensorstack.dev/v1beta1, with
// their status subresources.
func served(kube *kubefake.Clientset, kinds ...string) {
	list := &metav1.APIResourceList{GroupVersion: "batch.tensorstack.dev/v1beta1"}
	for _, k := range kinds {
		plural := strings.ToLower(k) + "s"
		list.APIResources = append(list.APIResources,
			metav1.APIResource{Name: plural, Kind: k, Namespaced: true},
			metav1.APIResource{Name: plural + "/status", Kind: k, Namespaced: true})
	}
	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{list}
}

// TestRefusesToStartWithoutCRDs: the controller starts only when every kind it runs is
// served, and otherwise names each missing kind and the file that installs it.
func TestRefusesToStartWithoutCRDs(t *testing.T) {
	all := []string{"GenericJob", "MPIJob", "ColossalAIJob", "TensorFlowTrainingJob", "XGBoostTrainingJob"}
	if got := len(kinds()); got != len(all) {
		t.Fatalf("the controller runs %d kinds, the test knows %d: add the new kind to the test", got, len(all))
	}
	kube := kubefake.NewClientset()

	err := checkCRDs(kube.Discovery(), kinds())
	if err == nil || !strings.Contains(err.Error(), "kubectl apply -f manifests/crds/") ||
		!strings.Contains(err.Error(), strings.Join(all, ", ")+" of batch.tensorstack.dev/v1beta1") {
		t.Fatalf("without the API: want every kind named and the fix, got %v", err)
	}

	served(kube, all...)
	if err := checkCRDs(kube.Discovery(), kinds()); err != nil {
		t.Fatalf("with every CRD installed: %v", err)
	}

	served(kube, "GenericJob", "ColossalAIJob", "TensorFlowTrainingJob")
	err = checkCRDs(kube.Discovery(), kinds())
	want := "the API server does not serve MPIJob, XGBoostTrainingJob of batch.tensorstack.dev/v1beta1: " +
		"install the CRDs with `kubectl apply -f manifests/crds/`, or just the missing ones with " +
		"`kubectl apply -f manifests/crds/batch.tensorstack.dev_mpijobs.yaml -f manifests/crds/batch.tensorstack.dev_xgboosttrainingjobs.yaml`"
	if err == nil || err.Error() != want {
		t.Fatalf("with two CRDs missing:\n got %v\nwant %s", err, want)
	}
}

// TestCRDFilesNamedInMessages: the file the message names for each kind is its CRD.
func TestCRDFilesNamedInMessages(t *testing.T) {
	for _, a := range kinds() {
		gvk := a.GroupVersionKind()
		data, err := os.ReadFile(filepath.Join("..", "..", crdFile(gvk)))
		if err != nil {
			t.Fatalf("%s: %v", gvk.Kind, err)
		}
		if !strings.Contains(string(data), "\n    kind: "+gvk.Kind+"\n") {
			t.Errorf("%s does not define %s", crdFile(gvk), gvk.Kind)
		}
	}
}

// TestLeaseTimings: timings with which two replicas could lead at once are refused, naming
// the flag.
func TestLeaseTimings(t *testing.T) {
	ok := options{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	if err := checkLeaseTimings(ok); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	fast := options{leaseDuration: 4 * time.Second, renewDeadline: 3 * time.Second, retryPeriod: time.Second}
	if err := checkLeaseTimings(fast); err != nil {
		t.Fatalf("%+v: %v", fast, err)
	}
	for _, tc := range []struct {
		change func(*options)
		flag   string
	}{
		{func(o *options) { o.leaseDuration = 15500 * time.Millisecond }, "--leader-elect-lease-duration"},
		{func(o *options) { o.leaseDuration = 0 }, "--leader-elect-lease-duration"},
		{func(o *options) { o.renewDeadline = 15 * time.Second }, "--leader-elect-renew-deadline"},
		{func(o *options) { o.retryPeriod = 9 * time.Second }, "--leader-elect-retry-period"},
		{func(o *options) { o.retryPeriod = 0 }, "--leader-elect-retry-period"},
	} {
		o := ok
		tc.change(&o)
		if err := checkLeaseTimings(o); err == nil || !strings.HasPrefix(err.Error(), tc.flag) {
			t.Errorf("%+v: want an error naming %s, got %v", o, tc.flag, err)
		}
	}
}

func TestGoMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		limit string
		set   bool
		want  int64
	}{
		{"", false, 0},
		{"512Mi", false, 512 << 20 / 10 * 9},
		{"536870912", false, 536870912 / 10 * 9}, // as the downward API gives it
		{"512Mi", true, 0},                       // GOMEMLIMIT wins
	} {
		got, err := goMemoryLimit(tc.limit, tc.set)
		if err != nil || got != tc.want {
			t.Errorf("goMemoryLimit(%q, GOMEMLIMIT set %v) = %d, %v; want %d", tc.limit, tc.set, got, err, tc.want)
		}
	}
	if _, err := goMemoryLimit("lots", false); err == nil {
		t.Error("a limit that is not a quantity was taken")
	}
}

// The free heap is handed back only at rest (little allocated since the last look), and only
// when there is enough of it to be worth a collection.
func TestFreeHeapHandedBackAtRest(t *testing.T) {
	for _, tc := range []struct {
		allocated, free uint64
		want            bool
	}{
		{0, restFree + 1, true}, {restAllocs - 1, 100 << 20, true},
		{restAllocs, 100 << 20, false}, // allocating: the collector will use the pages again
		{0, restFree, false},           // too little to be worth a collection
	} {
		if got := releaseAtRest(tc.allocated, tc.free); got != tc.want {
			t.Errorf("releaseAtRest(allocated %d, free %d) = %v, want %v", tc.allocated, tc.free, got, tc.want)
		}
	}
}

// The collector's growth target is Go's default for a small heap and half of it once the
// live heap is large; between the two lines it stays as it was.
func TestGCPercentFollowsTheLiveHeap(t *testing.T) {
	for _, tc := range []struct {
		live          uint64
		current, want int
	}{
		{0, 100, 100}, {largeHeap - 1, 100, 100}, {largeHeap, 100, 50}, {1 << 30, 100, 50},
		{largeHeap - 1, 50, 50}, {smallHeap, 50, 50}, {smallHeap - 1, 50, 100},
	} {
		if got := gcPercentFor(tc.live, tc.current); got != tc.want {
			t.Errorf("gcPercentFor(%d, %d) = %d, want %d", tc.live, tc.current, got, tc.want)
		}
	}
}

// TestHealthAddressTakenStopsTheStart: when --bind-address cannot be listened on, serve
// says so with the flag, instead of leaving a controller whose probes never answer.
func TestHealthAddressTakenStopsTheStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var ready atomic.Int32
	server, err := serve(taken.Addr().String(), false, &ready)
	if err == nil {
		_ = server.Close()
		t.Fatal("serve started on an address in use")
	}
	if want := "--bind-address=" + taken.Addr().String() + ": "; !strings.HasPrefix(err.Error(), want) ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("got %q, want it to start with %q and say the address is in use", err, want)
	}

	server, err = serve("127.0.0.1:0", false, &ready)
	if err != nil {
		t.Fatalf("on a free address: %v", err)
	}
	_ = server.Close()
}
