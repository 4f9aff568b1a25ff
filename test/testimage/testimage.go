// Package testimage writes small container images for tests, in the archive format the real
// node imports (test/cluster, Cluster.ImportImages; the pause image is one): a tar of an OCI
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
}

// Write writes the image, for this machine's architecture, to an archive at path, named ref
// in index.json (the OCI annotation and containerd's). The archive appears whole: it is
// written beside path and renamed.
func Write(path, ref string, image Image) error {
	img, err := build(image)
	if err != nil {
		return err
	}
	return archive.Write(path, img, ref, nil, time.Unix(0, 0))
}

// build makes the image for this machine's architecture.
func build(image Image) (v1.Image, error) {
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
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, image.Config
	return mutate.ConfigFile(img, cf)
}
