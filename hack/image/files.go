package main

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"

	"github.com/t9k-jobs/t9k-jobs/hack/image/archive"
)

// caBundlePath is where the image keeps its CA certificates (Debian's path, which Go and
// most TLS clients look at).
const caBundlePath = "/etc/ssl/certs/ca-certificates.crt"

// baseFiles are what the binary needs around it: the users (root, and nonroot 65532 that it
// runs as, with its home), name resolution from files then DNS, the CA certificates, and a
// /tmp. There is no shell and no other program.
func baseFiles() []archive.File {
	return []archive.File{
		{Path: "/etc", Mode: 0o755, Dir: true},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/ssl", Mode: 0o755, Dir: true},
		{Path: "/etc/ssl/certs", Mode: 0o755, Dir: true},
		{Path: caBundlePath, Mode: 0o644, Data: caBundle()},
		{Path: "/home", Mode: 0o755, Dir: true},
		{Path: "/home/nonroot", Mode: 0o700, UID: nonroot, GID: nonroot, Dir: true},
		{Path: "/root", Mode: 0o700, Dir: true},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/usr", Mode: 0o755, Dir: true},
		{Path: "/usr/local", Mode: 0o755, Dir: true},
		{Path: "/usr/local/bin", Mode: 0o755, Dir: true},
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
