package procnode

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// imageRef is an image as a pod or an archive names it, normalized as Docker does: a name
// without a registry is on docker.io (a single component under library/), and a name with
// neither tag nor digest has the tag latest.
type imageRef struct {
	// repo is the repository, registry included (docker.io is written index.docker.io).
	repo string
	// tag is empty when the name gives a digest only.
	tag string
	// digest is "sha256:<hex>", or empty.
	digest string
}

// parseImageRef reads repo:tag, repo@sha256:<digest> or repo:tag@sha256:<digest>.
func parseImageRef(s string) (imageRef, error) {
	base, digest, hasDigest := strings.Cut(s, "@")
	var ref imageRef
	if hasDigest {
		d, err := name.NewDigest(s)
		if err != nil {
			return ref, err
		}
		ref.digest = d.DigestStr()
		if digest != ref.digest {
			return ref, fmt.Errorf("image %q: bad digest", s)
		}
		// A tag beside the digest is kept, though the digest alone decides.
		if t, err := name.NewTag(base); err == nil && strings.Contains(lastComponent(base), ":") {
			ref.tag = t.TagStr()
		}
		ref.repo = d.Context().Name()
		return ref, nil
	}
	t, err := name.NewTag(base)
	if err != nil {
		return ref, err
	}
	ref.repo, ref.tag = t.Context().Name(), t.TagStr()
	return ref, nil
}

// lastComponent is what follows the last "/" of a name: where its tag is, if it has one
// (a registry's port is before it).
func lastComponent(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// String is the reference as it is compared: repo:tag, or repo@digest without a tag.
func (r imageRef) String() string {
	if r.tag == "" {
		return r.repo + "@" + r.digest
	}
	return r.repo + ":" + r.tag
}
