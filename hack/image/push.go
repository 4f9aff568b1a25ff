package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

// push sends the archive's image index, every platform of it, to a registry, with the
// credentials `docker login` (or crane/podman auth) stored. It returns where and the digest.
func push(ctx context.Context, path, to string) (string, string, error) {
	dir, err := os.MkdirTemp("", "t9k-image-push-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	images, err := archive.Open(path, dir)
	if err != nil {
		return "", "", err
	}
	if len(images) != 1 {
		return "", "", fmt.Errorf("%s holds %d images; push takes an archive of one", path, len(images))
	}
	if to == "" {
		to = images[0].Ref
	}
	ref, err := name.ParseReference(to)
	if err != nil {
		return "", "", fmt.Errorf("--image %q: %w", to, err)
	}
	if err := remote.WriteIndex(ref, images[0].Index, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", "", fmt.Errorf("pushing to %s: %w", ref, err)
	}
	digest, err := images[0].Index.Digest()
	return ref.String(), digest.String(), err
}
