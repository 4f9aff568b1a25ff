package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

// The rootfs subcommand packs a root file system that something else made (hack/lib/images.sh
// makes the real node's training image with mmdebstrap) into an image of one layer, in the
// archive format of `make image`.
//
// GNU tar reads the tree, since a Debian root file system holds what Go's archive/tar would
// have to be taught one by one: hard links, setuid files, file capabilities and other
// extended attributes, ACLs, device nodes. The contents of the directories the runtime mounts
// over (/dev, /proc, /sys, /run, /tmp) are left out, the directories kept. Its output is read
// once: hashed (the layer's diff ID), gzipped at the fastest level, hashed again (its digest)
// and written to a file beside the archive, which goes once the archive is written.

// rootfsOptions say what to pack and how to name it.
type rootfsOptions struct {
	dir, ref, out, createdBy string
	created                  time.Time
}

// rootfsExcludes are the tar patterns of what the layer leaves out.
var rootfsExcludes = []string{"./dev/*", "./proc/*", "./sys/*", "./run/*", "./tmp/*"}

// rootfsConfig is the image's configuration: a shell, on Debian's PATH.
func rootfsConfig(created time.Time) *v1.ConfigFile {
	return &v1.ConfigFile{
		Architecture: runtime.GOARCH, OS: "linux", Created: v1.Time{Time: created},
		Config: v1.Config{
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd: []string{"/bin/bash"},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

// packRootfs writes the image of o.dir to o.out and returns its manifest's digest and the
// archive's size.
func packRootfs(ctx context.Context, o rootfsOptions) (string, int64, error) {
	if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
		return "", 0, fmt.Errorf("--dir %s: not a directory", o.dir)
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return "", 0, err
	}
	start := time.Now()
	layer, err := tarLayer(ctx, o.dir, filepath.Dir(o.out))
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(layer.path)
	fmt.Fprintf(os.Stderr, "rootfs: layer of %.0f MiB, %.0f MiB gzipped, in %.1fs\n",
		float64(layer.uncompressed)/(1<<20), float64(layer.size)/(1<<20), time.Since(start).Seconds())

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, rootfsConfig(o.created)); err != nil {
		return "", 0, err
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer,
		History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: o.createdBy}})
	if err != nil {
		return "", 0, err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", 0, err
	}
	start = time.Now()
	if err := archive.Write(o.out, img, o.ref, img, o.created); err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(o.out)
	if err != nil {
		return "", 0, err
	}
	fmt.Fprintf(os.Stderr, "rootfs: archive written in %.1fs\n", time.Since(start).Seconds())
	return digest.String(), fi.Size(), nil
}

// tarLayer runs GNU tar over dir and writes its output, gzipped, to a file in tmpDir.
func tarLayer(ctx context.Context, dir, tmpDir string) (*fileLayer, error) {
	args := []string{"--create", "--file=-", "--directory=" + dir,
		"--format=posix", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls",
		// a mount left under dir (a bind of the host's /dev or /proc) is not packed
		"--one-file-system",
		// the same tree gives the same bytes: names sorted, no access or change times, no
		// process id in the names of extended headers
		"--sort=name", "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime"}
	for _, e := range rootfsExcludes {
		args = append(args, "--exclude="+e)
	}
	cmd := exec.CommandContext(ctx, "tar", append(args, ".")...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(tmpDir, ".rootfs-layer-*.tar.gz")
	if err != nil {
		return nil, err
	}
	l := &fileLayer{path: f.Name()}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(l.path)
		}
	}()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running tar: %w", err)
	}
	diffID, digest := sha256.New(), sha256.New()
	compressed := &countingWriter{w: io.MultiWriter(f, digest)}
	buf := bufio.NewWriterSize(compressed, 1<<20)
	gz, err := gzip.NewWriterLevel(buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	n, copyErr := io.Copy(io.MultiWriter(gz, diffID), stdout)
	if copyErr != nil {
		_ = cmd.Process.Kill()
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("tar of %s: %w", dir, err)
	}
	if copyErr != nil {
		return nil, copyErr
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	if err := buf.Flush(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	l.diffID, l.digest = sha256Hash(diffID), sha256Hash(digest)
	l.size, l.uncompressed = compressed.n, n
	ok = true
	return l, nil
}

func sha256Hash(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// fileLayer is a gzipped layer in a file whose digests were taken as it was written, so that
// nothing reads its gigabytes again to learn them.
type fileLayer struct {
	path               string
	digest, diffID     v1.Hash
	size, uncompressed int64
}

func (l *fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)                { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return readCloser{gz, func() error { gz.Close(); return f.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// createdTime is SOURCE_DATE_EPOCH when set (reproducible-builds' convention), now otherwise.
func createdTime() (time.Time, error) {
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		return time.Now().UTC().Truncate(time.Second), nil
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}
