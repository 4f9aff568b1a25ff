package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

func mustHash(t *testing.T, f func() (v1.Hash, error)) v1.Hash {
	t.Helper()
	h, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRootfsKeepsWhatDebianInstalls packs a tree with what a Debian root file system holds
// and reads the archive back: hard and symbolic links, a setuid program, extended attributes
// (a file capability too, as root), the mount points' contents left out and the mount points
// kept, and an image whose digests agree with its bytes.
func TestRootfsKeepsWhatDebianInstalls(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	write := func(name string, mode uint32, data string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, mode); err != nil { // the bits as given: past the umask, setuid too
			t.Fatal(err)
		}
	}
	write("usr/bin/python3.11", 0o755, "python")
	write("usr/bin/passwd", 0o4755, "setuid")
	write("usr/bin/ping", 0o755, "capable")
	write("dev/null", 0o666, "not a device, but under /dev")
	write("proc/1/status", 0o444, "")
	write("run/sshd.pid", 0o644, "1")
	write("tmp/scratch", 0o644, "x")
	for _, d := range []string{"sys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "usr/bin/python3.11"), filepath.Join(root, "usr/bin/python3.11-hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("python3.11", filepath.Join(root, "usr/bin/python3")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(filepath.Join(root, "usr/bin/python3.11"), "user.t9k", []byte("kept"), 0); err != nil {
		t.Skipf("the file system of %s takes no extended attributes: %v", dir, err)
	}
	capable := os.Geteuid() == 0
	if capable {
		// cap_net_raw in the permitted and effective sets, as `setcap cap_net_raw+ep` writes it
		// (struct vfs_cap_data, revision 2).
		v := []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		if err := syscall.Setxattr(filepath.Join(root, "usr/bin/ping"), "security.capability", v, 0); err != nil {
			t.Fatal(err)
		}
	}

	out := filepath.Join(dir, "out", "training.oci.tar")
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := rootfsOptions{dir: root, ref: "localhost/t9k/test:rootfs", out: out, createdBy: "test", created: created}
	digest, _, err := packRootfs(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "out", ".rootfs-layer-*")); len(left) != 0 {
		t.Errorf("the layer file was left: %v", left)
	}

	layoutDir := filepath.Join(dir, "layout")
	if err := archive.Unpack(out, layoutDir); err != nil {
		t.Fatal(err)
	}
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest.String() != digest ||
		m.Manifests[0].Annotations[archive.ContainerdNameAnnotation] != o.ref {
		t.Fatalf("index.json lists %+v, want one image %s named %s", m.Manifests, digest, o.ref)
	}
	img, err := top.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || !slices.Equal(cfg.Config.Cmd, []string{"/bin/bash"}) ||
		!slices.Equal(cfg.Config.Env, []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}) ||
		!cfg.Created.Time.Equal(created) {
		t.Errorf("config %+v, created %v: want linux/%s, bash, Debian's PATH, %v", cfg.Config, cfg.Created, runtime.GOARCH, created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want one", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	// The digests were taken as the layer was written: check them against its bytes.
	digestOf := func(r io.ReadCloser, err error) (string, int64) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		h := sha256.New()
		n, err := io.Copy(h, r)
		if err != nil {
			t.Fatal(err)
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), n
	}
	blob, blobSize := digestOf(os.Open(filepath.Join(layoutDir, "blobs", "sha256", mustHash(t, layers[0].Digest).Hex)))
	diff, _ := digestOf(layers[0].Uncompressed())
	if size, _ := layers[0].Size(); blob != mustHash(t, layers[0].Digest).String() || blobSize != size {
		t.Errorf("the layer's blob has digest %s and size %d; the manifest says %v and %d", blob, blobSize, mustHash(t, layers[0].Digest), size)
	}
	if diffIDs := cfg.RootFS.DiffIDs; len(diffIDs) != 1 || diffIDs[0].String() != diff {
		t.Errorf("the config's diff IDs are %v; the layer's uncompressed digest is %s", diffIDs, diff)
	}

	entries := map[string]*tar.Header{}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = h
	}
	for _, gone := range []string{"dev/null", "proc/1", "proc/1/status", "run/sshd.pid", "tmp/scratch"} {
		if entries[gone] != nil {
			t.Errorf("the layer has %s", gone)
		}
	}
	for _, kept := range []string{"dev", "proc", "sys", "run", "tmp"} {
		if h := entries[kept]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("the layer lacks the directory %s: %+v", kept, h)
		}
	}
	if h := entries["tmp"]; h != nil && h.Mode&0o7777 != 0o1777 {
		t.Errorf("/tmp has mode %o, want 1777", h.Mode)
	}
	if h := entries["usr/bin/passwd"]; h == nil || h.Mode&0o7777 != 0o4755 || h.Uid != 0 || h.Uname != "" {
		t.Errorf("usr/bin/passwd: %+v, want mode 4755, owner 0 by number only", h)
	}
	if h := entries["usr/bin/python3"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "python3.11" {
		t.Errorf("usr/bin/python3: %+v, want a symbolic link to python3.11", h)
	}
	// GNU tar stores the first name it meets and links the others to it.
	hard, first := entries["usr/bin/python3.11-hard"], entries["usr/bin/python3.11"]
	if first == nil || hard == nil || first.Typeflag != tar.TypeReg || hard.Typeflag != tar.TypeLink ||
		strings.TrimPrefix(hard.Linkname, "./") != "usr/bin/python3.11" {
		t.Errorf("usr/bin/python3.11 %+v and -hard %+v: want a file and a hard link to it", first, hard)
	}
	if h := entries["usr/bin/python3.11"]; h == nil || h.PAXRecords["SCHILY.xattr.user.t9k"] != "kept" {
		t.Errorf("usr/bin/python3.11 lost its extended attribute user.t9k: %+v", h)
	}
	if capable {
		if h := entries["usr/bin/ping"]; h == nil || len(h.PAXRecords["SCHILY.xattr.security.capability"]) != 20 {
			t.Errorf("usr/bin/ping lost its file capability: %+v", h)
		}
	}
	for name, h := range entries {
		if _, ok := h.PAXRecords["atime"]; ok {
			t.Errorf("%s has its access time: the same tree would not give the same layer", name)
		}
	}
}
