package procnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// A projected volume as the API server's admission gives every pod (kube-api-access): a token
// bound to the pod, the cluster's CA and the namespace, written atomically (..data), with the
// volume's mode; the token is renewed at 80% of its lifetime, and the volume rewritten.
func TestProjectedVolume(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakeClock(start)
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns"}, Data: map[string]string{"ca.crt": "CA"}})
	var mu sync.Mutex
	var requests []*authenticationv1.TokenRequest
	kube.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		req := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, req)
		req.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", len(requests)),
			ExpirationTimestamp: metav1.NewTime(clock.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))}
		return true, req, nil
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"b": "2", "a": "1"}},
		Spec: corev1.PodSpec{ServiceAccountName: "sa", Containers: []corev1.Container{{Name: "main"}}}}
	p := newProjector(kube, pod, "10.0.0.2", t.Logf)
	p.clock = clock
	sources := []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](600), Path: "token", Audience: "aud"}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
			{Path: "meta/labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}, Mode: ptr.To[int32](0o600)},
		}}},
	}
	dir := filepath.Join(t.TempDir(), "vol")
	ctx, cancel := context.WithCancel(context.Background())
	var background sync.WaitGroup
	defer func() {
		cancel()
		background.Wait()
	}()
	err := p.project(ctx, dir, sources, ptr.To[int32](0o440), func(f func()) {
		background.Add(1)
		go func() { defer background.Done(); f() }()
	})
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err.Error()
		}
		return string(data)
	}
	for name, want := range map[string]string{"token": "token-1", "ca.crt": "CA", "namespace": "ns", "meta/labels": "a=\"1\"\nb=\"2\"\n"} {
		if got := read(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if link, err := os.Readlink(filepath.Join(dir, "token")); err != nil || link != "..data/token" {
		t.Errorf("token links to %q (%v), want ..data/token", link, err)
	}
	for name, want := range map[string]os.FileMode{"token": 0o440, "meta/labels": 0o600} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode().Perm(), err, want)
		}
	}
	req := requests[0]
	if ref := req.Spec.BoundObjectRef; ref == nil || ref.Kind != "Pod" || ref.Name != "p" || ref.UID != "uid-1" || len(req.Spec.Audiences) != 1 || req.Spec.Audiences[0] != "aud" {
		t.Errorf("the token request: %+v", req.Spec)
	}

	// 80% of 600 s is 480 s: not renewed a second before, renewed then.
	waitForWaiter := func() {
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return clock.HasWaiters(), nil
		}); err != nil {
			t.Fatal("the renewal does not wait")
		}
	}
	waitForWaiter()
	clock.Step(479 * time.Second)
	if got := read("token"); got != "token-1" {
		t.Fatalf("renewed before 80%% of its lifetime: %q", got)
	}
	clock.Step(time.Second)
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return read("token") == "token-2", nil
	}); err != nil {
		t.Fatalf("not renewed at 80%% of its lifetime: %q", read("token"))
	}
	if got := read("ca.crt"); got != "CA" {
		t.Errorf("ca.crt after the renewal: %q", got)
	}
	// ..<time>, ..data, token, ca.crt, namespace, meta: the old version goes just after the
	// switch of ..data that the new token showed.
	var names []string
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		entries, _ := os.ReadDir(dir)
		names = names[:0]
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return len(names) == 6, nil
	}); err != nil {
		t.Errorf("the volume holds %v", names)
	}
	// And again 480 s after the renewal.
	waitForWaiter()
	clock.Step(480 * time.Second)
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return read("token") == "token-3", nil
	}); err != nil {
		t.Fatalf("not renewed a second time: %q", read("token"))
	}
}

// When every container runs as the same user, the token is that user's, mode 0600; fsGroup
// makes every file the group's, readable by it.
func TestProjectedOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)},
		Containers:      []corev1.Container{{Name: "a"}, {Name: "b"}}}}
	p := newProjector(nil, pod, "", t.Logf)
	if p.fsUser == nil || *p.fsUser != 1000 {
		t.Fatalf("fsUser %v", p.fsUser)
	}
	dir := t.TempDir()
	files := map[string]projectedFile{"token": {data: []byte("t"), mode: 0o600, uid: p.fsUser}, "ns": {data: []byte("ns"), mode: 0o644}}
	if err := writeAtomic(dir, files, p.fsGroup); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"token": "1000:2000 -rw-r-----", "ns": "0:2000 -rw-r--r--"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := ownerOf(fi) + " " + fi.Mode().String(); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	pod.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](7)}
	if p := newProjector(nil, pod, "", t.Logf); p.fsUser != nil {
		t.Errorf("containers of two users have fsUser %d", *p.fsUser)
	}
}

func TestTokenRenewal(t *testing.T) {
	exp := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	if got, want := tokenRenewal(exp, 3600), exp.Add(-12*time.Minute); !got.Equal(want) {
		t.Errorf("an hour's token: renewed at %v, want %v", got, want)
	}
	if got, want := tokenRenewal(exp, 48*3600), exp.Add(-24*time.Hour); !got.Equal(want) {
		t.Errorf("two days' token: renewed at %v, want %v (a day after it was issued)", got, want)
	}
}
