package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// caBundlePath is where the image keeps its CA certificates (Debian's path, which Go and
// most TLS clients look at).
const caBundlePath = "/etc/ssl/certs/ca-certificates.crt"

// file is one entry of a layer: a directory when data is nil and dir is set.
type file struct {
	path     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseFiles are what the binary needs around it: the users (root, and nonroot 65532 that it
// runs as, with its home), name resolution from files then DNS, the CA certificates, and a
// /tmp. There is no shell and no other program.
func baseFiles() []file {
	return []file{
		{path: "/etc", mode: 0o755, dir: true},
		{path: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{path: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "/etc/ssl", mode: 0o755, dir: true},
		{path: "/etc/ssl/certs", mode: 0o755, dir: true},
		{path: caBundlePath, mode: 0o644, data: caBundle()},
		{path: "/home", mode: 0o755, dir: true},
		{path: "/home/nonroot", mode: 0o700, uid: nonroot, gid: nonroot, dir: true},
		{path: "/root", mode: 0o700, dir: true},
		{path: "/tmp", mode: 0o1777, dir: true},
		{path: "/usr", mode: 0o755, dir: true},
		{path: "/usr/local", mode: 0o755, dir: true},
		{path: "/usr/local/bin", mode: 0o755, dir: true},
	}
}

// caBundle is Mozilla's root certificates as the Go project publishes them (a module
// pinned in go.mod, so the same for every build), in PEM. Roots that NSS trusts only for
// certificates issued before a date are left out: a PEM file cannot say so.
func caBundle() []byte {
	var b bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint == nil {
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
		}
	}
	return b.Bytes()
}

// layer is a gzipped tar of files, in the order given, each with the same time.
func layer(files []file, date time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.path[1:], Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: date, Format: tar.FormatPAX}
		if f.dir {
			h.Name += "/"
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(compression))
}
