package procnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// volumes makes the pod's file system (its tmpfs and /tmp, rootfs.go) and its volumes as
// directories, and returns them by name: Secrets and ConfigMaps as files (keys or items,
// with their modes), projected and downwardAPI volumes (projected.go; their tokens are kept
// fresh by goroutines that background counts, until ctx ends), emptyDir (writable by every
// user; medium Memory in the pod's tmpfs), hostPath as it is, a PersistentVolumeClaim as one
// directory per claim shared by every pod of the node. Other kinds are empty directories. A
// container mounts them in its own root. All but hostPath and claims go with the pod
// (removeScratch).
func (r *podRunner) volumes(ctx context.Context, background *sync.WaitGroup) (map[string]string, error) {
	fs, err := startPodFS(r.dir)
	if err != nil {
		return nil, err
	}
	r.fs = fs
	projector := newProjector(r.n.opts.Kube, r.pod, r.ip.String(), func(format string, args ...any) {
		r.n.log("pod %s: %s", r.key, fmt.Sprintf(format, args...))
	})
	goBackground := func(f func()) {
		background.Add(1)
		go func() {
			defer background.Done()
			f()
		}()
	}
	out := map[string]string{}
	for _, v := range r.pod.Spec.Volumes {
		dir := filepath.Join(r.dir, "volumes", v.Name)
		var err error
		switch {
		case v.Secret != nil:
			err = r.keyFiles(ctx, dir, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, v.Secret.Optional, func(ctx context.Context, name string) (map[string][]byte, error) {
				s, err := r.n.opts.Kube.CoreV1().Secrets(r.namespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return s.Data, nil
			})
		case v.ConfigMap != nil:
			err = r.keyFiles(ctx, dir, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, v.ConfigMap.Optional, func(ctx context.Context, name string) (map[string][]byte, error) {
				cm, err := r.n.opts.Kube.CoreV1().ConfigMaps(r.namespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				data := map[string][]byte{}
				for k, v := range cm.Data {
					data[k] = []byte(v)
				}
				for k, v := range cm.BinaryData {
					data[k] = v
				}
				return data, nil
			})
		case v.Projected != nil:
			err = projector.project(ctx, dir, v.Projected.Sources, v.Projected.DefaultMode, goBackground)
		case v.DownwardAPI != nil:
			err = projector.project(ctx, dir, []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{Items: v.DownwardAPI.Items}}},
				v.DownwardAPI.DefaultMode, goBackground)
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			dir, err = r.fs.memoryDir(v.Name)
		case v.EmptyDir != nil:
			err = mkdirMode(dir, 0o777)
		case v.HostPath != nil:
			dir = v.HostPath.Path
			if t := v.HostPath.Type; t != nil && *t == corev1.HostPathDirectoryOrCreate {
				err = os.MkdirAll(dir, 0o755)
			}
		case v.PersistentVolumeClaim != nil:
			dir = filepath.Join(r.n.opts.StateDir, "claims", r.namespace, v.PersistentVolumeClaim.ClaimName)
			err = os.MkdirAll(dir, 0o777)
		default:
			err = os.MkdirAll(dir, 0o777)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out[v.Name] = dir
	}
	return out, nil
}

// removeScratch removes what the pod had on the node, but its logs: its file system (the
// tmpfs goes with its holder) and its volumes' directories.
func (r *podRunner) removeScratch() {
	r.fs.remove()
	_ = os.RemoveAll(filepath.Join(r.dir, "volumes"))
}

// keyFiles writes the keys of a Secret or ConfigMap as files, waiting a while for it to
// exist (a kubelet waits, too).
func (r *podRunner) keyFiles(ctx context.Context, dir, name string, items []corev1.KeyToPath, defaultMode *int32, optional *bool,
	get func(context.Context, string) (map[string][]byte, error)) error {
	var data map[string][]byte
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		data, err = get(ctx, name)
		switch {
		case apierrors.IsNotFound(err) && optional != nil && *optional:
			data = nil
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if data == nil {
				continue
			}
			return fmt.Errorf("%s has no key %s", name, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		path := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, v, m); err != nil {
			return err
		}
		if err := os.Chmod(path, m); err != nil {
			return err
		}
	}
	return nil
}
