package procnode

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

// The images a node is given (Options.ImageArchives): each archive is a tar of an OCI image
// layout, whose index.json names its images by annotation. Nothing is ever pulled: a pod whose
// image is not among them runs the machine's programs, as every pod did before images.
//
// An archive is unpacked once into <state>/images/layouts/, and the root file system of each
// image the node runs is unpacked once (its layers flattened, whiteouts applied, owners,
// modes and links kept) into <state>/images/roots/<manifest digest>, the lower layer of the
// overlay of every container that runs it.

// image is one image the node can run: a manifest for this machine's platform.
type image struct {
	// digests are its manifest's and, when it came in an image index, the index's.
	digests []string
	// refs are the references naming it (imageRef.String).
	refs []string
	// id is what a container's status shows as its imageID: repo@sha256:<manifest digest>.
	id     string
	img    v1.Image
	config v1.Config
	size   int64

	unpack sync.Once
	root   string // the unpacked root file system
	err    error
}

// imageStore is what the node knows of its images. Directories among its sources are read
// again when a pod names an image it does not know: archives added to them since are found.
type imageStore struct {
	sources []string
	dir     string
	log     func(format string, args ...any)

	mu     sync.Mutex
	loaded map[string]string // archive path → its size and time when it was loaded
	images []*image
	broken map[string]error // references of images that cannot run here, and why
}

func newImageStore(sources []string, stateDir string, log func(string, ...any)) *imageStore {
	return &imageStore{sources: sources, dir: filepath.Join(stateDir, "images"), log: log,
		loaded: map[string]string{}, broken: map[string]error{}}
}

// load reads every archive of the sources not read yet; an archive that cannot be read is
// an error (it was given to the node to be run).
func (s *imageStore) load() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, path := range s.archives() {
		fi, err := os.Stat(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stamp := fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
		if s.loaded[path] == stamp {
			continue
		}
		if err := s.loadArchive(path, stamp); err != nil {
			errs = append(errs, fmt.Errorf("image archive %s: %w", path, err))
			continue
		}
		s.loaded[path] = stamp
	}
	return errors.Join(errs...)
}

// archives lists the archive files of the sources: files as given, and the *.tar files of
// directories.
func (s *imageStore) archives() []string {
	var out []string
	for _, src := range s.sources {
		fi, err := os.Stat(src)
		if err != nil || !fi.IsDir() {
			out = append(out, src) // a missing file is reported by load
			continue
		}
		matches, _ := filepath.Glob(filepath.Join(src, "*.tar"))
		sort.Strings(matches)
		out = append(out, matches...)
	}
	return out
}

// loadArchive unpacks an archive's layout and adds its images; those of an archive loaded
// earlier under the same path are replaced (it was rewritten).
func (s *imageStore) loadArchive(path, stamp string) error {
	sum := sha256.Sum256([]byte(path + "\x00" + stamp))
	dir := filepath.Join(s.dir, "layouts", hex.EncodeToString(sum[:8]))
	_ = os.RemoveAll(dir) // an earlier copy of a rewritten archive
	if err := archive.Unpack(path, dir); err != nil {
		return err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range m.Manifests {
		var refs []string
		for _, key := range []string{archive.ContainerdNameAnnotation, archive.RefNameAnnotation} {
			if ref, err := parseImageRef(desc.Annotations[key]); err == nil && desc.Annotations[key] != "" && !slices.Contains(refs, ref.String()) {
				refs = append(refs, ref.String())
			}
		}
		img, err := s.platformImage(idx, desc)
		if err != nil {
			for _, r := range refs {
				s.broken[r] = err
			}
			s.log("image archive %s: %v", path, err)
			continue
		}
		img.refs = refs
		s.add(img)
		s.log("image %s (%s) from %s", strings.Join(refs, ", "), img.id, path)
	}
	return nil
}

// platformImage is the image a descriptor of index.json stands for on this machine: the
// manifest itself, or the linux/GOARCH manifest of an image index.
func (s *imageStore) platformImage(idx v1.ImageIndex, desc v1.Descriptor) (*image, error) {
	digests := []string{desc.Digest.String()}
	switch {
	case desc.MediaType.IsImage():
	case desc.MediaType.IsIndex():
		child, err := idx.ImageIndex(desc.Digest)
		if err != nil {
			return nil, err
		}
		m, err := child.IndexManifest()
		if err != nil {
			return nil, err
		}
		d, found := platformManifest(m.Manifests)
		if found {
			digests, desc, idx = append(digests, d.Digest.String()), d, child
		} else {
			return nil, fmt.Errorf("image index %s has no manifest for linux/%s", desc.Digest, runtime.GOARCH)
		}
	default:
		return nil, fmt.Errorf("%s is neither an image nor an image index (%s)", desc.Digest, desc.MediaType)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if cf.OS != "" && cf.OS != "linux" || cf.Architecture != "" && cf.Architecture != runtime.GOARCH {
		return nil, fmt.Errorf("image %s is for %s/%s, not linux/%s", desc.Digest, cf.OS, cf.Architecture, runtime.GOARCH)
	}
	size, _ := img.Size()
	layers, _ := img.Layers()
	for _, l := range layers {
		n, _ := l.Size()
		size += n
	}
	// The manifest's digest comes last: it is what the image is known by.
	digests[0], digests[len(digests)-1] = digests[len(digests)-1], digests[0]
	return &image{digests: digests, img: img, config: cf.Config, size: size}, nil
}

// platformManifest picks this machine's manifest of an image index: linux/GOARCH, or the only
// one when it says no platform.
func platformManifest(manifests []v1.Descriptor) (v1.Descriptor, bool) {
	var images []v1.Descriptor
	for _, d := range manifests {
		if !d.MediaType.IsImage() {
			continue
		}
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			return d, true
		}
		images = append(images, d)
	}
	if len(images) == 1 && images[0].Platform == nil {
		return images[0], true
	}
	return v1.Descriptor{}, false
}

// add records an image, in place of one of the same manifest.
func (s *imageStore) add(img *image) {
	img.id = imageID(img)
	for _, r := range img.refs {
		delete(s.broken, r)
	}
	for i, old := range s.images {
		if old.digests[0] == img.digests[0] {
			s.images[i] = img
			return
		}
	}
	s.images = append(s.images, img)
}

func imageID(img *image) string {
	if len(img.refs) > 0 {
		if ref, err := parseImageRef(img.refs[0]); err == nil {
			return ref.repo + "@" + img.digests[0]
		}
	}
	return img.digests[0]
}

// find resolves a pod's image: by digest when it names one, else by reference. It returns
// nil when the node was not given the image, and an error when it was but cannot run it.
func (s *imageStore) find(name string) (*image, error) {
	ref, err := parseImageRef(name)
	if err != nil {
		return nil, nil // not a reference an archive could name: the machine's programs
	}
	if img, err := s.lookup(ref); img != nil || err != nil {
		return img, err
	}
	if err := s.load(); err != nil {
		s.log("%v", err)
	}
	return s.lookup(ref)
}

func (s *imageStore) lookup(ref imageRef) (*image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, img := range s.images {
		for _, d := range img.digests {
			if ref.digest != "" && d == ref.digest {
				return img, nil
			}
		}
		for _, r := range img.refs {
			if ref.digest == "" && r == ref.String() {
				return img, nil
			}
		}
	}
	if ref.digest == "" {
		return nil, s.broken[ref.String()]
	}
	return nil, nil
}

// names lists the images for the Node's status, as a kubelet reports those it holds.
func (s *imageStore) names() []imageSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]imageSummary, 0, len(s.images))
	for _, img := range s.images {
		out = append(out, imageSummary{names: append([]string{img.id}, img.refs...), size: img.size})
	}
	return out
}

type imageSummary struct {
	names []string
	size  int64
}

// rootFS unpacks the image's root file system, once, and returns its directory.
func (s *imageStore) rootFS(img *image) (string, error) {
	img.unpack.Do(func() {
		hex := strings.TrimPrefix(img.digests[0], "sha256:")
		img.root = filepath.Join(s.dir, "roots", hex)
		if _, err := os.Stat(img.root); err == nil {
			return // unpacked by an earlier run of the node with this state directory
		}
		start := time.Now()
		tmp := img.root + ".partial"
		_ = os.RemoveAll(tmp)
		if img.err = unpackRoot(img.img, tmp); img.err == nil {
			img.err = os.Rename(tmp, img.root)
		}
		if img.err != nil {
			_ = os.RemoveAll(tmp)
			return
		}
		s.log("image %s unpacked in %s", img.id, time.Since(start).Round(time.Millisecond))
	})
	return img.root, img.err
}

// unpackRoot writes the image's flattened file system (mutate.Extract applies whiteouts) to
// dir: directories, files, symbolic and hard links, with their owners (when the node is
// root) and modes. Device nodes and other special files are left out.
func unpackRoot(img v1.Image, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	type link struct{ path, target string }
	var links []link // hard links, made last: their targets may come later in the stream
	type dirMode struct {
		path string
		hdr  *tar.Header
	}
	var dirs []dirMode // modes of directories, set last: a read-only one would stop writes
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		path, err := within(dir, hdr.Name)
		if err != nil || path == dir {
			continue // the root itself, or a name that leaves it
		}
		if err := mkdirNoLinks(dir, filepath.Dir(path)); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(path, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			dirs = append(dirs, dirMode{path, hdr})
			continue
		case tar.TypeReg:
			f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, path); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := within(dir, hdr.Linkname)
			if err != nil {
				return err
			}
			links = append(links, link{path, target})
			continue
		default:
			continue
		}
		if err := setOwnerMode(path, hdr); err != nil {
			return err
		}
	}
	for _, l := range links {
		if err := os.Link(l.target, l.path); err != nil {
			return fmt.Errorf("hard link %s: %w", l.path, err)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := setOwnerMode(dirs[i].path, dirs[i].hdr); err != nil {
			return err
		}
	}
	return nil
}

// mkdirNoLinks makes the directory path under root, as MkdirAll does, but refuses to go
// through a symbolic link: one of the image's, absolute, would point out of its root, to the
// machine's files.
func mkdirNoLinks(root, path string) error {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." {
		return err
	}
	p := root
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
		case err != nil:
			return err
		case fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link", p)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		}
	}
	return nil
}

// setOwnerMode gives a file its owner (as root only) and mode, set-user-ID bits included
// (set after the owner, which clears them).
func setOwnerMode(path string, hdr *tar.Header) error {
	if os.Geteuid() == 0 {
		if err := os.Lchown(path, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	if hdr.Typeflag == tar.TypeSymlink {
		return nil
	}
	mode := os.FileMode(hdr.Mode).Perm()
	if hdr.Mode&04000 != 0 {
		mode |= os.ModeSetuid
	}
	if hdr.Mode&02000 != 0 {
		mode |= os.ModeSetgid
	}
	if hdr.Mode&01000 != 0 {
		mode |= os.ModeSticky
	}
	return os.Chmod(path, mode)
}

// within is where a name of an archive lands under dir; a name that would leave dir is an
// error.
func within(dir, name string) (string, error) {
	p := filepath.Join(dir, filepath.Clean("/"+name))
	if p != dir && !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		return "", fmt.Errorf("%q leaves the archive's directory", name)
	}
	return p, nil
}
