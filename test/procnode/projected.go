package procnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Projected volumes (and downwardAPI volumes, a projection of one source), as a kubelet makes
// them: Secret and ConfigMap keys, downward API items (fields and resources), and service
// account tokens from the TokenRequest API, bound to the pod (so they die with it), with the
// volume's defaultMode or the item's mode. This is how the API server's admission gives a pod
// its service account: a volume kube-api-access-* with a token, the cluster's CA
// (kube-root-ca.crt) and the namespace, at /var/run/secrets/kubernetes.io/serviceaccount.
//
// The files are written as a kubelet's atomic writer writes them, so that a reader never sees
// half of an update: into a directory ..<time>, which the link ..data points to, and each
// file a link through ..data. A token is renewed at 80% of its lifetime (or after a day, if
// that comes first), as a kubelet renews it, and the volume rewritten then.
//
// When every container runs as the same user (runAsUser), a token is that user's, mode 0600;
// with fsGroup, every file is of that group and readable by it (0600 becomes 0640), as a kubelet
// sets a volume's ownership.

// projectedFile is one file of a projected volume.
type projectedFile struct {
	data []byte
	mode os.FileMode
	// uid owns the file when set (a token's, for the pod's user).
	uid *int64
}

// projector makes the files of a pod's projected volumes.
type projector struct {
	kube  kubernetes.Interface
	pod   *corev1.Pod
	podIP string
	clock clock.Clock
	log   func(format string, args ...any)
	// fsUser is the user of every container of the pod, if they have one; fsGroup the pod's.
	fsUser, fsGroup *int64
}

func newProjector(kube kubernetes.Interface, pod *corev1.Pod, podIP string, log func(string, ...any)) *projector {
	p := &projector{kube: kube, pod: pod, podIP: podIP, clock: clock.RealClock{}, log: log}
	if sc := pod.Spec.SecurityContext; sc != nil {
		p.fsGroup = sc.FSGroup
	}
	var users []*int64
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			users = append(users, effectiveSecurityContext(pod, &list[i]).RunAsUser)
		}
	}
	if len(users) > 0 && users[0] != nil {
		p.fsUser = users[0]
		for _, u := range users {
			if u == nil || *u != *users[0] {
				p.fsUser = nil
			}
		}
	}
	return p
}

// project writes a projected volume into dir and keeps its tokens fresh until ctx ends
// (in a goroutine it starts, which done waits for).
func (p *projector) project(ctx context.Context, dir string, sources []corev1.VolumeProjection, defaultMode *int32, done func(func())) error {
	files, refresh, err := p.files(ctx, sources, defaultMode)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeAtomic(dir, files, p.fsGroup); err != nil {
		return err
	}
	if !refresh.IsZero() {
		done(func() { p.keepFresh(ctx, dir, sources, defaultMode, refresh) })
	}
	return nil
}

// keepFresh rewrites the volume when its first token is due for renewal, until ctx ends. A
// renewal that fails is tried again ten seconds later.
func (p *projector) keepFresh(ctx context.Context, dir string, sources []corev1.VolumeProjection, defaultMode *int32, refresh time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.clock.After(refresh.Sub(p.clock.Now())):
		}
		files, next, err := p.files(ctx, sources, defaultMode)
		if err == nil {
			err = writeAtomic(dir, files, p.fsGroup)
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log("renewing the volume %s: %v", filepath.Base(dir), err)
			}
			refresh = p.clock.Now().Add(10 * time.Second)
			continue
		}
		refresh = next
	}
}

// files are the volume's files, and when its first token is due for renewal (zero: it has
// none).
func (p *projector) files(ctx context.Context, sources []corev1.VolumeProjection, defaultMode *int32) (map[string]projectedFile, time.Time, error) {
	mode := os.FileMode(ptr.Deref(defaultMode, corev1.ProjectedVolumeSourceDefaultMode))
	out := map[string]projectedFile{}
	var refresh time.Time
	itemMode := func(m *int32) os.FileMode {
		if m != nil {
			return os.FileMode(*m)
		}
		return mode
	}
	keys := func(data map[string][]byte, items []corev1.KeyToPath, name string, optional *bool) error {
		if data == nil {
			return nil // optional, and missing
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			v, ok := data[it.Key]
			if !ok {
				if optional != nil && *optional {
					continue
				}
				return fmt.Errorf("%s has no key %s", name, it.Key)
			}
			out[it.Path] = projectedFile{data: v, mode: itemMode(it.Mode)}
		}
		return nil
	}
	for _, src := range sources {
		switch {
		case src.Secret != nil:
			data, err := waitForKeys(ctx, src.Secret.Name, src.Secret.Optional, func(ctx context.Context) (map[string][]byte, error) {
				s, err := p.kube.CoreV1().Secrets(p.pod.Namespace).Get(ctx, src.Secret.Name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return s.Data, nil
			})
			if err == nil {
				err = keys(data, src.Secret.Items, "Secret "+src.Secret.Name, src.Secret.Optional)
			}
			if err != nil {
				return nil, refresh, err
			}
		case src.ConfigMap != nil:
			data, err := waitForKeys(ctx, src.ConfigMap.Name, src.ConfigMap.Optional, func(ctx context.Context) (map[string][]byte, error) {
				cm, err := p.kube.CoreV1().ConfigMaps(p.pod.Namespace).Get(ctx, src.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return configMapData(cm), nil
			})
			if err == nil {
				err = keys(data, src.ConfigMap.Items, "ConfigMap "+src.ConfigMap.Name, src.ConfigMap.Optional)
			}
			if err != nil {
				return nil, refresh, err
			}
		case src.DownwardAPI != nil:
			for _, it := range src.DownwardAPI.Items {
				v, err := p.downward(it)
				if err != nil {
					return nil, refresh, fmt.Errorf("%s: %w", it.Path, err)
				}
				out[it.Path] = projectedFile{data: []byte(v), mode: itemMode(it.Mode)}
			}
		case src.ServiceAccountToken != nil:
			token, renew, err := p.token(ctx, src.ServiceAccountToken)
			if err != nil {
				return nil, refresh, err
			}
			f := projectedFile{data: []byte(token), mode: mode, uid: p.fsUser}
			if p.fsUser != nil || p.fsGroup != nil {
				f.mode = 0o600
			}
			out[src.ServiceAccountToken.Path] = f
			if refresh.IsZero() || renew.Before(refresh) {
				refresh = renew
			}
		}
	}
	return out, refresh, nil
}

// token requests a token of the pod's service account, bound to the pod, and says when to
// renew it: at 80% of the lifetime asked for, or a day after it was issued if that is sooner.
func (p *projector) token(ctx context.Context, src *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	seconds := ptr.Deref(src.ExpirationSeconds, 3600)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: p.pod.Name, UID: p.pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := p.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := p.kube.CoreV1().ServiceAccounts(p.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("a token of service account %s: %w", sa, err)
	}
	return tr.Status.Token, tokenRenewal(tr.Status.ExpirationTimestamp.Time, seconds), nil
}

// tokenRenewal is when a token that expires at exp, asked for a lifetime of seconds, is
// renewed.
func tokenRenewal(exp time.Time, seconds int64) time.Time {
	lifetime := time.Duration(seconds) * time.Second
	issued := exp.Add(-lifetime)
	at := issued.Add(lifetime * 8 / 10)
	if day := issued.Add(24 * time.Hour); day.Before(at) {
		at = day
	}
	return at
}

// downward is the content of a downward API item.
func (p *projector) downward(it corev1.DownwardAPIVolumeFile) (string, error) {
	switch {
	case it.FieldRef != nil:
		switch it.FieldRef.FieldPath {
		case "metadata.labels":
			return formatMap(p.pod.Labels), nil
		case "metadata.annotations":
			return formatMap(p.pod.Annotations), nil
		}
		return fieldValue(p.pod, p.podIP, it.FieldRef.FieldPath)
	case it.ResourceFieldRef != nil:
		return resourceValue(p.pod, nil, it.ResourceFieldRef)
	}
	return "", nil
}

// formatMap writes labels or annotations as a downward API file has them: key="value" lines,
// sorted.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}

func configMapData(cm *corev1.ConfigMap) map[string][]byte {
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data
}

// waitForKeys reads a Secret's or ConfigMap's data, waiting a while for it to exist, as a
// kubelet retries a volume's set-up; an optional one that is missing has nil data.
func waitForKeys(ctx context.Context, name string, optional *bool, get func(context.Context) (map[string][]byte, error)) (map[string][]byte, error) {
	var data map[string][]byte
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		data, err = get(ctx)
		switch {
		case apierrors.IsNotFound(err) && optional != nil && *optional:
			data = nil
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case err == nil && data == nil:
			data = map[string][]byte{}
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

// writeAtomic writes a volume's files into a new directory dir/..<time>, points dir/..data at
// it in one rename, links each top-level name to ..data/<name>, and removes what the previous
// version had that this one has not. With fsGroup every file is of that group, readable by it.
func writeAtomic(dir string, files map[string]projectedFile, fsGroup *int64) error {
	version := filepath.Join(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.000000000"))
	if err := os.Mkdir(version, 0o755); err != nil {
		return err
	}
	top := map[string]bool{}
	for path, f := range files {
		rel := filepath.Clean("/" + path)[1:]
		if rel == "" || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("bad path %q", path)
		}
		top[strings.SplitN(rel, "/", 2)[0]] = true
		full := filepath.Join(version, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		mode := f.mode
		if fsGroup != nil {
			mode |= 0o040
		}
		if err := os.WriteFile(full, f.data, mode); err != nil {
			return err
		}
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
		uid, gid := -1, -1
		if f.uid != nil {
			uid = int(*f.uid)
		}
		if fsGroup != nil {
			gid = int(*fsGroup)
		}
		if uid >= 0 || gid >= 0 {
			if err := os.Chown(full, uid, gid); err != nil {
				return err
			}
		}
	}
	data := filepath.Join(dir, "..data")
	old, _ := os.Readlink(data)
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, data); err != nil {
		return err
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				return err
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] && e.Type()&os.ModeSymlink != 0 {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" && old != filepath.Base(version) {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
