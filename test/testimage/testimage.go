// Package testimage writes small container images for tests, in the archive format the
// process node is given images in (test/procnode, Options.ImageArchives): a tar of an OCI
// image layout whose index.json names the image by its full reference.
package testimage

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is an entry of a layer: a regular file (Data), a directory (Dir), a symbolic link
// (Symlink), a hard link (Hardlink, to another entry's path) or a whiteout (Path
// ".../.wh.<name>", which removes name of the layers below).
type File struct {
	Path     string
	Mode     int64
	UID, GID int
	Data     []byte
	Dir      bool
	Symlink  string
	Hardlink string
}

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
	dir, err := os.MkdirTemp("", "t9k-testimage-")
	if err != nil {
		return d, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return d, err
	}
	names := layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref, "io.containerd.image.name": ref})
	if idx, ok := top.(v1.ImageIndex); ok {
		err = p.AppendIndex(idx, names)
	} else {
		err = p.AppendImage(img, names)
	}
	if err != nil {
		return d, err
	}
	return d, tarDir(dir, path)
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
		data, err := layerTar(files)
		if err != nil {
			return nil, err
		}
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
			tarball.WithMediaType(types.OCILayer))
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

func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Path, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case f.Dir:
			hdr.Typeflag = tar.TypeDir
		case f.Symlink != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Symlink
		case f.Hardlink != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, f.Hardlink
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir to a tar at path.
func tarDir(dir, path string) error {
	var names []string
	if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != dir {
			names = append(names, p)
		}
		return err
	}); err != nil {
		return err
	}
	sort.Strings(names)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	partial := path + ".partial"
	f, err := os.Create(partial)
	if err != nil {
		return err
	}
	defer os.Remove(partial)
	tw := tar.NewWriter(f)
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(partial, path)
}
