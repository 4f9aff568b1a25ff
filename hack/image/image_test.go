package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

const testRef = "registry.example.com/t9k/t9k-job-controller:v9.9.9"

// fakeArchive writes an archive of the real image's shape, with small stand-ins for the
// binaries (compiling the controller twice is for TestSameCommitSameDigest).
func fakeArchive(t *testing.T) (path string, idx v1.ImageIndex) {
	t.Helper()
	dir := t.TempDir()
	var binaries []binary
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		binaries = append(binaries, binary{arch: arch, path: p})
	}
	src := source{revision: "0123456789abcdef", date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	idx, first, err := assemble(binaries, src, "v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "image.tar")
	if err := archive.Write(path, idx, testRef, first, src.date); err != nil {
		t.Fatal(err)
	}
	return path, idx
}

func TestImageRunsAsNonrootWithNothingButItsBinary(t *testing.T) {
	_, idx := fakeArchive(t)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("index lists %+v, want linux/amd64 and linux/arm64", im.Manifests)
	}
	for _, d := range im.Manifests {
		if d.ArtifactType != "" {
			t.Errorf("the index names %v an artifact of type %q: tools that predate artifactType drop it and change the digest", d.Digest, d.ArtifactType)
		}
	}
	if im.Annotations["org.opencontainers.image.revision"] != "0123456789abcdef" || im.Annotations["org.opencontainers.image.version"] != "v9.9.9" ||
		im.Annotations["org.opencontainers.image.source"] != sourceURL {
		t.Errorf("index annotations %v lack the source, revision or version", im.Annotations)
	}
	img, err := idx.Image(im.Manifests[1].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "arm64" || cfg.OS != "linux" || cfg.Config.User != "65532:65532" ||
		strings.Join(cfg.Config.Entrypoint, " ") != binaryPath || cfg.Config.Labels["org.opencontainers.image.revision"] != "0123456789abcdef" {
		t.Errorf("config %+v: want linux/arm64, user 65532:65532, entrypoint %s, OCI labels", cfg.Config, binaryPath)
	}
	files := map[string]*tar.Header{}
	contents := map[string][]byte{}
	rc := mutate.Extract(img)
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
		files["/"+strings.TrimSuffix(h.Name, "/")] = h
		contents["/"+h.Name], _ = io.ReadAll(tr)
	}
	for _, shell := range []string{"/bin/sh", "/bin/bash", "/bin", "/sbin"} {
		if files[shell] != nil {
			t.Errorf("the image has %s", shell)
		}
	}
	if h := files[binaryPath]; h == nil || h.Mode != 0o755 || string(contents[binaryPath]) != "binary for arm64" {
		t.Errorf("%s: %+v %q, want the arm64 binary, mode 0755", binaryPath, h, contents[binaryPath])
	}
	if h := files["/home/nonroot"]; h == nil || h.Uid != nonroot {
		t.Errorf("/home/nonroot: %+v, want owned by %d", h, nonroot)
	}
	if !strings.Contains(string(contents["/etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user: %q", contents["/etc/passwd"])
	}
	certs := 0
	for rest := contents[caBundlePath]; ; certs++ {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("%s: certificate %d: %v", caBundlePath, certs, err)
		}
	}
	if certs < 100 {
		t.Errorf("%s holds %d certificates, want Mozilla's roots (over 100)", caBundlePath, certs)
	}
}

// TestArchiveIsReadByImageTools reads the archive as the tools the docs name do: the OCI
// layout (skopeo's oci-archive, containerd's import: kind load), docker's manifest.json
// (docker load, crane push), and a push of the whole index to a registry.
func TestArchiveIsReadByImageTools(t *testing.T) {
	path, idx := fakeArchive(t)
	want, _ := idx.Digest()
	im, _ := idx.IndexManifest()
	amd64 := im.Manifests[0].Digest

	images, err := archive.Open(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := images[0].Index.Digest(); len(images) != 1 || images[0].Ref != testRef || got != want {
		t.Fatalf("archive.Open: %d images, %q %v; want %s %v", len(images), images[0].Ref, got, testRef, want)
	}

	tag, _ := name.NewTag(testRef)
	docker, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("docker's manifest.json: %v", err)
	}
	// docker's format keeps the config and layers, not the manifest: compare the config.
	amd64Image, _ := idx.Image(amd64)
	wantConfig, _ := amd64Image.ConfigName()
	if got, err := docker.ConfigName(); err != nil || got != wantConfig {
		t.Errorf("manifest.json's image has config %v (%v), want the linux/amd64 image's %v", got, err, wantConfig)
	}

	reg := httptest.NewServer(registry.New(registry.Logger(stdlog.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	pushed, digest, err := push(context.Background(), path, host+"/t9k/controller:v9.9.9")
	if err != nil || digest != want.String() {
		t.Fatalf("push: %s %s %v, want %v", pushed, digest, err, want)
	}
	ref, _ := name.ParseReference(host + "/t9k/controller:v9.9.9")
	if got, err := remote.Index(ref); err != nil {
		t.Fatal(err)
	} else if d, _ := got.Digest(); d != want {
		t.Errorf("the registry holds %v, want %v", d, want)
	}

	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("skopeo is missing (hack/install-deps.sh installs it)")
		}
		t.Skip("skopeo is missing (hack/install-deps.sh installs it)")
	}
	run := func(args ...string) string {
		out, err := exec.Command(skopeo, append([]string{"--insecure-policy"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	raw := run("inspect", "--raw", "oci-archive:"+path)
	if sum := sha256.Sum256([]byte(raw)); "sha256:"+hex.EncodeToString(sum[:]) != want.String() {
		t.Errorf("skopeo reads an index of digest sha256:%x from oci-archive:, want %v", sum, want)
	}
	run("copy", "--all", "--preserve-digests", "--dest-tls-verify=false", "oci-archive:"+path, "docker://"+host+"/skopeo/controller:v9.9.9")
	ref, _ = name.ParseReference(host + "/skopeo/controller:v9.9.9")
	if got, err := remote.Index(ref); err != nil {
		t.Fatal(err)
	} else if d, _ := got.Digest(); d != want {
		t.Errorf("skopeo copy --all pushed %v, want %v", d, want)
	}
	var inspect struct{ Digest string }
	if err := json.Unmarshal([]byte(run("inspect", "docker-archive:"+path)), &inspect); err != nil || inspect.Digest == "" {
		t.Errorf("skopeo inspect docker-archive: %v %+v", err, inspect)
	}
}

// TestSameCommitSameDigest builds the real image twice, from two clones of the commit in
// different directories: the digests and the archives' bytes must be the same.
func TestSameCommitSameDigest(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not a git checkout")
	}
	var digests, sums, archives []string
	src := strings.TrimSpace(string(top)) // then the first clone: both clones have one commit
	var head []byte                       // the commit the clones have
	for i := range 2 {
		clone := filepath.Join(t.TempDir(), fmt.Sprintf("clone-%d", i))
		if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", src, clone).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		src = clone
		if head, err = exec.Command("git", "-C", clone, "rev-parse", "HEAD").Output(); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "image.tar")
		cmd := exec.Command("go", "run", "./hack/image", "build", "--image", testRef, "--version", "v9.9.9", "--out", out,
			"--digest-file", out+".digest")
		cmd.Dir = clone
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build in %s: %v\n%s", clone, err, b)
		}
		d, err := os.ReadFile(out + ".digest")
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		digests, sums = append(digests, strings.TrimSpace(string(d))), append(sums, hex.EncodeToString(sum[:]))
		archives = append(archives, out)
		t.Logf("clone %d: index %s, archive sha256:%s (%d bytes)", i, digests[i], sums[i], len(data))
	}
	if digests[0] != digests[1] || sums[0] != sums[1] {
		t.Errorf("two builds of one commit differ: index %s vs %s, archive %s vs %s", digests[0], digests[1], sums[0], sums[1])
	}
	// The amd64 binary of the archive says which build it is.
	images, err := archive.Open(archives[0], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	im, _ := images[0].Index.IndexManifest()
	img, err := images[0].Index.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "t9k-job-controller")
	if err := extractFile(img, binaryPath, bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if want := "t9k-job-controller v9.9.9 (revision " + strings.TrimSpace(string(head)) + ", "; err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("the image's binary --version: %q %v, want it to start %q", out, err, want)
	}
	if !bytes.HasPrefix([]byte(digests[0]), []byte("sha256:")) {
		t.Errorf("digest %q", digests[0])
	}
}

// extractFile writes the file at path in img's file system to dst, executable.
func extractFile(img v1.Image, path, dst string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return fmt.Errorf("%s in the image: %w", path, err)
		}
		if "/"+h.Name == path {
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o755)
		}
	}
}
