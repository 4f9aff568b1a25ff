package progress

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"
)

// reloadEvery is how often certificate files are read again: a certificate manager that
// renews them (cert-manager's csi driver, a mounted Secret) is followed without a restart.
const reloadEvery = time.Minute

// FromFiles returns the certificate and key of the given files, and the CA pods trust it by:
// caFile, or certFile itself when empty (a certificate file that ends with its CA). A
// goroutine reads them again every minute until ctx ends.
func FromFiles(ctx context.Context, certFile, keyFile, caFile string) (*Certs, error) {
	if caFile == "" {
		caFile = certFile
	}
	c := &Certs{}
	read := func() (bool, error) {
		cert, err := os.ReadFile(certFile)
		if err != nil {
			return false, err
		}
		key, err := os.ReadFile(keyFile)
		if err != nil {
			return false, err
		}
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return false, err
		}
		if _, err := parseCert(ca); err != nil {
			return false, fmt.Errorf("%s: %w", caFile, err)
		}
		return c.set(cert, key, ca)
	}
	if _, err := read(); err != nil {
		return nil, fmt.Errorf("the progress endpoint's certificate: %w", err)
	}
	go every(ctx, reloadEvery, func() {
		changed, err := read()
		switch {
		case err != nil:
			klog.FromContext(ctx).Error(err, "Reading the progress endpoint's certificate again", "certFile", certFile)
		case changed:
			klog.FromContext(ctx).Info("Read a new certificate for the progress endpoint", "certFile", certFile)
		}
	})
	return c, nil
}

// every calls f every period, the first time one period from now, until ctx ends.
func every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
