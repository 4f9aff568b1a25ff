// Command image builds the controller's container image without a container daemon, and
// pushes it (`make image`, `make push`; docs/install.md, "Building the image").
//
//	go run ./hack/image build --image REF --version V --out FILE
//	go run ./hack/image push --archive FILE [--image REF]
//	go run ./hack/image rootfs --dir DIR --image REF --out FILE
//
// rootfs packs a root file system made elsewhere (hack/lib/images.sh: the real node's
// training image) into an image of one layer, in the same archive format.
//
// It uses go-containerregistry, a library for images and registries that needs no daemon:
// an image here is a static Go binary and a few files, so nothing calls for a Dockerfile's
// build steps, and every byte can be chosen to be the same on every build of one commit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "build":
		err = buildCommand(ctx, os.Args[2:])
	case "push":
		err = pushCommand(ctx, os.Args[2:])
	case "rootfs":
		err = rootfsCommand(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: image build --image REF --version V --out FILE | image push --archive FILE [--image REF] | image rootfs --dir DIR --image REF --out FILE")
	os.Exit(2)
}

func buildCommand(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	o := buildOptions{}
	fs.StringVar(&o.ref, "image", "", "the image's full reference, with its tag (registry/repository:tag)")
	fs.StringVar(&o.version, "version", "", "the version the binary reports (--version, t9k_build_info)")
	fs.StringVar(&o.out, "out", "", "the archive to write")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "platforms of the image index, comma-separated")
	fs.StringVar(&o.pkg, "package", "./cmd/t9k-job-controller", "the main package to build")
	digestFile := fs.String("digest-file", "", "also write the image index's digest (sha256:...) to this file")
	_ = fs.Parse(args)
	if o.ref == "" || o.version == "" || o.out == "" {
		return fmt.Errorf("build needs --image, --version and --out")
	}
	o.platforms = strings.Split(*platforms, ",")
	digest, size, err := build(ctx, o)
	if err != nil {
		return err
	}
	if *digestFile != "" {
		if err := os.WriteFile(*digestFile, []byte(digest+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s: %s@%s (%.1f MiB)\n", o.out, o.ref, digest, float64(size)/(1<<20))
	return nil
}

func pushCommand(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	path := fs.String("archive", "", "the archive `make image` wrote")
	ref := fs.String("image", "", "where to push it (registry/repository:tag); the archive's own name when empty")
	_ = fs.Parse(args)
	if *path == "" {
		return fmt.Errorf("push needs --archive")
	}
	pushed, digest, err := push(ctx, *path, *ref)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", pushed, digest)
	return nil
}

func rootfsCommand(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rootfs", flag.ExitOnError)
	o := rootfsOptions{}
	fs.StringVar(&o.dir, "dir", "", "the root file system to pack")
	fs.StringVar(&o.ref, "image", "", "the image's full reference, with its tag")
	fs.StringVar(&o.out, "out", "", "the archive to write")
	fs.StringVar(&o.createdBy, "created-by", "hack/image rootfs", "what the layer's history says made it")
	_ = fs.Parse(args)
	if o.dir == "" || o.ref == "" || o.out == "" {
		return fmt.Errorf("rootfs needs --dir, --image and --out")
	}
	var err error
	if o.created, err = createdTime(); err != nil {
		return err
	}
	digest, size, err := packRootfs(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s@%s (%.1f MiB)\n", o.out, o.ref, digest, float64(size)/(1<<20))
	return nil
}
