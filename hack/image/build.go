package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

type buildOptions struct {
	ref, version, out, pkg string
	platforms              []string // os/arch
}

// The image's layout: one static binary, run as the nonroot user of files.go.
const (
	binaryPath = "/usr/local/bin/t9k-job-controller"
	nonroot    = 65532
	sourceURL  = "https://github.com/t9k-jobs/t9k-jobs"
)

// build compiles the binary for each platform, makes an image of each, and writes their index
// to the archive. It returns the index's digest and the archive's size.
func build(ctx context.Context, o buildOptions) (string, int64, error) {
	src, err := sourceOf(ctx)
	if err != nil {
		return "", 0, err
	}
	bin, err := os.MkdirTemp("", "t9k-image-bin-")
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(bin)
	var binaries []binary
	for _, platform := range o.platforms {
		goos, arch, ok := strings.Cut(platform, "/")
		if !ok || goos != "linux" {
			return "", 0, fmt.Errorf("platform %q: want linux/<arch>", platform)
		}
		b := binary{arch: arch, path: filepath.Join(bin, arch, "t9k-job-controller")}
		if err := compile(ctx, o.pkg, b.path, arch, o.version, src.revision); err != nil {
			return "", 0, err
		}
		binaries = append(binaries, b)
	}
	idx, first, err := assemble(binaries, src, o.version)
	if err != nil {
		return "", 0, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", 0, err
	}
	if err := archive.Write(o.out, idx, o.ref, first, src.date); err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(o.out)
	if err != nil {
		return "", 0, err
	}
	return digest.String(), fi.Size(), nil
}

// binary is the controller built for one architecture.
type binary struct{ arch, path string }

// assemble makes an image of each binary and their index, annotated with where they come
// from; it returns the index and its first image.
func assemble(binaries []binary, src source, version string) (v1.ImageIndex, v1.Image, error) {
	annotations := map[string]string{
		"org.opencontainers.image.title":    "t9k-job-controller",
		"org.opencontainers.image.source":   sourceURL,
		"org.opencontainers.image.revision": src.revision,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.created":  src.date.UTC().Format(time.RFC3339),
	}
	base, err := archive.Layer(baseFiles(), src.date)
	if err != nil {
		return nil, nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var first v1.Image
	for _, b := range binaries {
		img, err := image(base, b.path, b.arch, src.date, annotations)
		if err != nil {
			return nil, nil, err
		}
		if first == nil {
			first = img
		}
		desc, err := plainDescriptor(img)
		if err != nil {
			return nil, nil, err
		}
		desc.Platform = &v1.Platform{OS: "linux", Architecture: b.arch}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: describedImage{img, desc}, Descriptor: desc})
	}
	return mutate.Annotations(idx, annotations).(v1.ImageIndex), first, nil
}

// describedImage is an image whose descriptor in the index is the plain one: go-containerregistry
// would add an artifactType (the config's media type), which the OCI spec reserves for
// artifacts and which tools that predate it drop, changing the index's digest when they copy it
// (skopeo 1.9 refuses to, with --preserve-digests).
type describedImage struct {
	v1.Image
	desc v1.Descriptor
}

func (i describedImage) Descriptor() (*v1.Descriptor, error) { d := i.desc; return &d, nil }

func plainDescriptor(img v1.Image) (v1.Descriptor, error) {
	var d v1.Descriptor
	var err error
	if d.MediaType, err = img.MediaType(); err != nil {
		return d, err
	}
	if d.Size, err = img.Size(); err != nil {
		return d, err
	}
	d.Digest, err = img.Digest()
	return d, err
}

// source is what the image records of the source it was built from.
type source struct {
	revision string
	date     time.Time // every file's and the image's time
}

// sourceOf reads the commit and its time from git; SOURCE_DATE_EPOCH overrides the time, as
// reproducible-builds tools agree. A tree with changes (untracked files too, as go build
// counts them) gets "-dirty" on its revision.
func sourceOf(ctx context.Context) (source, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	var s source
	var err error
	if s.revision, err = git("rev-parse", "HEAD"); err != nil {
		return s, fmt.Errorf("reading the commit (git rev-parse HEAD): %w", err)
	}
	if changes, err := git("status", "--porcelain"); err == nil && changes != "" {
		s.revision += "-dirty"
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return s, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return s, fmt.Errorf("source date %q: %w", epoch, err)
	}
	s.date = time.Unix(secs, 0).UTC()
	return s, nil
}

// compile builds a static binary: no cgo, paths trimmed, symbols stripped, the version and
// revision set. The revision is given rather than stamped by go build (-buildvcs), which
// GOFLAGS may turn off and which would make the binary depend on the environment's setting.
func compile(ctx context.Context, pkg, out, arch, version, revision string) error {
	const v = "github.com/t9k-jobs/t9k-jobs/pkg/version."
	ldflags := fmt.Sprintf("-s -w -X %sversion=%s -X %srevision=%s", v, version, v, revision)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for linux/%s: %w", pkg, arch, err)
	}
	return nil
}

// image is one platform's image: the base files, then the binary.
func image(base v1.Layer, binary, arch string, date time.Time, annotations map[string]string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	app, err := archive.Layer([]archive.File{{Path: binaryPath, Mode: 0o755, Data: data}}, date)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range annotations {
		labels[k] = v
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: arch, OS: "linux", Created: v1.Time{Time: date},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
			Entrypoint: []string{binaryPath},
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + caBundlePath},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: date}, CreatedBy: "hack/image: users, CA certificates, /tmp"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: date}, CreatedBy: "hack/image: " + binaryPath}})
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, annotations).(v1.Image), nil
}
