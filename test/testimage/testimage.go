// Package testimage writes small container images for tests, in the archive format the
// process node is given images in (test/procnode, Options.ImageArchives): a tar of an OCI
// image layout whose index.json names the image by its full reference.
package testimage

import (
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

// File is an entry of a layer (hack/image/archive.File).
type File = archive.File

// Image describes an image: its layers, bottom first, and its configuration.
type Image struct {
	Layers [][]File
	Config v1.Config
	// Index wraps the image in an image index with a manifest for linux/<GOARCH> (and one for
	// another architecture, which the node must not pick), as multi-platform images are.
	Index bool
}

// Digests are what an archive holds: the image manifest's digest, and its index's when it
// has one.
type Digests struct {
	Manifest, Index string
}

// Write writes the image to an archive at path, named ref in index.json (the OCI annotation
// and containerd's). The archive appears whole: it is written beside path and renamed.
func Write(path, ref string, image Image) (Digests, error) {
	var d Digests
	img, err := build(image, runtime.GOARCH)
	if err != nil {
		return d, err
	}
	h, err := img.Digest()
	if err != nil {
		return d, err
	}
	d.Manifest = h.String()
	var top mutate.Appendable = img
	if image.Index {
		other, err := build(image, otherArch())
		if err != nil {
			return d, err
		}
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		idx = mutate.AppendManifests(idx,
			mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch()}}},
			mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}})
		h, err := idx.Digest()
		if err != nil {
			return d, err
		}
		d.Index, top = h.String(), idx
	}
	return d, archive.Write(path, top, ref, nil, time.Unix(0, 0))
}

func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

// build makes the image for one architecture.
func build(image Image, arch string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, files := range image.Layers {
		l, err := archive.Layer(files, time.Unix(0, 0))
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", arch, image.Config
	return mutate.ConfigFile(img, cf)
}
