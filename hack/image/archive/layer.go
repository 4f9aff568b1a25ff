package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is an entry of a layer: a regular file (Data), a directory (Dir), a symbolic link
// (Symlink), a hard link (Hardlink, to another entry's path) or a whiteout (Path
// ".../.wh.<name>", which removes name of the layers below). Paths are from the root, with
// or without a leading slash.
type File struct {
	Path     string
	Mode     int64
	UID, GID int
	Data     []byte
	Dir      bool
	Symlink  string
	Hardlink string
}

// Layer is a gzipped tar of files (an OCI layer), in the order given, each with mtime. Go's
// gzip writes the same bytes for the same input, so a layer's digest depends on its files
// alone.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			h.Name += "/"
			h.Typeflag = tar.TypeDir
		case f.Symlink != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Symlink
		case f.Hardlink != "":
			h.Typeflag, h.Linkname = tar.TypeLink, strings.TrimPrefix(f.Hardlink, "/")
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
}
