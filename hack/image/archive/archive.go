// Package archive writes and reads the image archive `make image` produces: a tar of an OCI
// image layout (oci-layout, index.json, blobs/sha256/...) whose index.json names the image
// index by its reference, plus a docker-save style manifest.json for one platform's image.
// The layout is what `skopeo copy oci-archive:`, `kind load image-archive` (containerd) and
// `docker load` read; manifest.json is what `crane push` and older `docker load` read.
//
// The tar itself is reproducible: entries in a fixed order, with fixed owners, modes and
// times, so the same image always gives the same archive bytes.
package archive

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Annotations of index.json that name an image: the OCI one, and containerd's, which
// `ctr import` (and so `kind load image-archive`) uses for the full reference.
const (
	RefNameAnnotation        = "org.opencontainers.image.ref.name"
	ContainerdNameAnnotation = "io.containerd.image.name"
)

// dockerManifest is one entry of docker save's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// Write writes top (an image index, or one image), named ref (a full reference such as
// registry.example.com/x/y:v1), to the archive at path; docker, if not nil, is the image
// listed in manifest.json. mtime is every entry's time. The archive appears whole: it is
// written beside path and renamed.
func Write(path string, top mutate.Appendable, ref string, docker v1.Image, mtime time.Time) error {
	dir, err := os.MkdirTemp("", "t9k-image-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	names := layout.WithAnnotations(map[string]string{RefNameAnnotation: ref, ContainerdNameAnnotation: ref})
	switch t := top.(type) {
	case v1.ImageIndex:
		err = p.AppendIndex(t, names)
	case v1.Image:
		err = p.AppendImage(t, names)
	default:
		err = fmt.Errorf("%T is neither an image nor an index", top)
	}
	if err != nil {
		return fmt.Errorf("writing the image layout: %w", err)
	}
	if docker != nil {
		m, err := dockerEntry(docker, ref)
		if err != nil {
			return err
		}
		data, err := json.Marshal([]dockerManifest{m})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), data, 0o644); err != nil {
			return err
		}
	}
	return tarDir(dir, path, mtime)
}

// dockerEntry lists img's config and layers by their blob paths in the layout, which holds
// them already: docker save's format, without copies.
func dockerEntry(img v1.Image, ref string) (dockerManifest, error) {
	m := dockerManifest{RepoTags: []string{ref}}
	cfg, err := img.ConfigName()
	if err != nil {
		return m, err
	}
	m.Config = blobPath(cfg)
	layers, err := img.Layers()
	if err != nil {
		return m, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return m, err
		}
		m.Layers = append(m.Layers, blobPath(d))
	}
	return m, nil
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// tarDir writes the files under dir to a tar at path, sorted, owned by root, with mtime.
func tarDir(dir, path string, mtime time.Time) error {
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	}); err != nil {
		return err
	}
	sort.Strings(names)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path + ".partial")
	if err != nil {
		return err
	}
	defer os.Remove(path + ".partial")
	tw := tar.NewWriter(f)
	for _, name := range names {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size(), Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			if err := copyFile(tw, filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".partial", path)
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// Image is one image index of an opened archive.
type Image struct {
	Ref   string // the reference index.json names it by
	Index v1.ImageIndex
}

// Open unpacks the archive at path into dir (which it creates) and returns its image
// indexes with the references they are named by.
func Open(path, dir string) ([]Image, error) {
	if err := Unpack(path, dir); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %w", path, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	var images []Image
	for _, d := range m.Manifests {
		if !d.MediaType.IsIndex() {
			continue
		}
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		ref := d.Annotations[ContainerdNameAnnotation]
		if ref == "" {
			ref = d.Annotations[RefNameAnnotation]
		}
		images = append(images, Image{Ref: ref, Index: idx})
	}
	if len(images) == 0 {
		return nil, fmt.Errorf("%s: index.json lists no image index", path)
	}
	return images, nil
}

// Unpack unpacks the archive at path (an image layout: plain files and directories) into
// dir, which it creates.
func Unpack(path, dir string) error {
	if err := untar(path, dir); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return fmt.Errorf("%s: not an OCI image layout: no index.json", path)
	}
	return nil
}

func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive", h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.Create(target)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: an image layout holds only files and directories", h.Name)
		}
	}
}
