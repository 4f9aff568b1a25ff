package procnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/t9k-jobs/t9k-jobs/test/testimage"
)

func TestParseImageRef(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []struct{ in, want, digest string }{
		{"busybox", "index.docker.io/library/busybox:latest", ""},
		{"docker.io/library/busybox:latest", "index.docker.io/library/busybox:latest", ""},
		{"user/app:1.0", "index.docker.io/user/app:1.0", ""},
		{"ghcr.io/t9k-jobs/t9k-job-controller:dev", "ghcr.io/t9k-jobs/t9k-job-controller:dev", ""},
		{"localhost:5000/app", "localhost:5000/app:latest", ""},
		{"ghcr.io/x/y@" + digest, "ghcr.io/x/y@" + digest, digest},
		{"ghcr.io/x/y:v1@" + digest, "ghcr.io/x/y:v1", digest},
		{"localhost:5000/y@" + digest, "localhost:5000/y@" + digest, digest},
	} {
		ref, err := parseImageRef(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if ref.String() != c.want || ref.digest != c.digest {
			t.Errorf("%s: got %s (digest %q), want %s (digest %q)", c.in, ref, ref.digest, c.want, c.digest)
		}
	}
	for _, bad := range []string{"", "UPPER/case", "x@sha256:short"} {
		if _, err := parseImageRef(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestImageStore: images are found by every name a pod may give them (reference, the index's
// digest, the platform manifest's), in archives given as files or found in a directory later;
// the root file system is the layers flattened, whiteouts applied, links and modes kept.
func TestImageStore(t *testing.T) {
	dir := t.TempDir()
	layers := [][]testimage.File{
		{
			{Path: "bin", Dir: true, Mode: 0o755},
			{Path: "bin/tool", Mode: 0o4755, Data: []byte("tool")},
			{Path: "etc/gone", Mode: 0o644, Data: []byte("from below")},
			{Path: "etc/opaque/old", Mode: 0o644, Data: []byte("old")},
			{Path: "data", Dir: true, Mode: 0o700, UID: 1000, GID: 1000},
			{Path: "data/file", Mode: 0o600, UID: 1000, GID: 1000, Data: []byte("mine")},
		},
		{
			{Path: "etc/.wh.gone"},
			{Path: "etc/opaque/.wh..wh..opq"},
			{Path: "etc/opaque/new", Mode: 0o644, Data: []byte("new")},
			{Path: "bin/link", Symlink: "tool"},
			{Path: "bin/hard", Hardlink: "bin/tool"},
			{Path: "abs", Symlink: "/etc"},
		},
	}
	cfg := v1.Config{Entrypoint: []string{"/bin/tool"}, User: "1000"}
	multi, err := testimage.Write(filepath.Join(dir, "multi.tar"), "ghcr.io/t9k/multi:v1", testimage.Image{Layers: layers, Config: cfg, Index: true})
	if err != nil {
		t.Fatal(err)
	}
	watched := filepath.Join(dir, "watched")
	if err := os.Mkdir(watched, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newImageStore([]string{filepath.Join(dir, "multi.tar"), watched}, filepath.Join(dir, "state"), t.Logf)
	if err := s.load(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ghcr.io/t9k/multi:v1", "ghcr.io/t9k/multi@" + multi.Index, "ghcr.io/t9k/multi@" + multi.Manifest,
		"ghcr.io/t9k/multi:v1@" + multi.Manifest, "other.io/name@" + multi.Index} {
		img, err := s.find(name)
		if err != nil || img == nil {
			t.Fatalf("%s: %v, %v", name, img, err)
		}
		if img.digests[0] != multi.Manifest || img.id != "ghcr.io/t9k/multi@"+multi.Manifest {
			t.Errorf("%s: found %v, id %s, want the linux manifest %s", name, img.digests, img.id, multi.Manifest)
		}
	}
	for _, name := range []string{"ghcr.io/t9k/multi:v2", "ghcr.io/t9k/multi", "machine", "busybox"} {
		if img, err := s.find(name); img != nil || err != nil {
			t.Errorf("%s: found %v, %v", name, img, err)
		}
	}

	// An archive added to the directory afterwards is found when a pod names it.
	plain, err := testimage.Write(filepath.Join(watched, "plain.tar"), "busybox", testimage.Image{Layers: layers[:1], Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.find("docker.io/library/busybox:latest")
	if err != nil || img == nil || img.digests[0] != plain.Manifest {
		t.Fatalf("busybox: %v, %v", img, err)
	}
	if len(s.names()) != 2 {
		t.Errorf("the node lists %v", s.names())
	}

	img, _ = s.find("ghcr.io/t9k/multi:v1")
	root, err := s.rootFS(img)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.rootFS(img); again != root || err != nil {
		t.Errorf("unpacked again: %s, %v", again, err)
	}
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return "error: " + err.Error()
		}
		return string(data)
	}
	for p, want := range map[string]string{"bin/tool": "tool", "bin/link": "tool", "bin/hard": "tool", "etc/opaque/new": "new", "data/file": "mine"} {
		if got := read(p); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"etc/gone", "etc/opaque/old"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s is there: the whiteout was not applied", p)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "abs")); err != nil || target != "/etc" {
		t.Errorf("abs links to %q (%v), want /etc", target, err)
	}
	fi, err := os.Stat(filepath.Join(root, "bin/tool"))
	if err != nil || fi.Mode() != 0o755|os.ModeSetuid {
		t.Errorf("bin/tool: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(root, "data")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data: %v", err)
	} else if os.Geteuid() == 0 && !strings.Contains(ownerOf(fi), "1000:1000") {
		t.Errorf("data is owned by %s, want 1000:1000", ownerOf(fi))
	}
}

// TestImageStoreBroken: an archive that cannot be read is an error of the node's start.
func TestImageStoreBroken(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.tar"), []byte("not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := newImageStore([]string{filepath.Join(dir, "bad.tar")}, dir, t.Logf).load(); err == nil {
		t.Error("a broken archive loaded")
	}
	if err := newImageStore([]string{filepath.Join(dir, "missing.tar")}, dir, t.Logf).load(); err == nil {
		t.Error("a missing archive loaded")
	}
}

func ownerOf(fi os.FileInfo) string {
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}
