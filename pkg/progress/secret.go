package progress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
)

// The serving certificate made by the controller lives in a Secret of its own namespace, so
// that every replica serves the same one and each job's ConfigMap holds one CA whichever
// replica wrote it: the CA (ca.crt, ca.key) and the serving certificate and key (tls.crt,
// tls.key). The first replica to start makes it; one that finds it lacking (a host it must
// serve, a certificate close to its end) makes a new serving certificate for every host the
// old one had and its own, with the same CA while the CA has a year left. Replicas that start
// together race: the create or the update that loses reads the winner's and starts over.

// Keys of the Secret.
const (
	secretCACert  = "ca.crt"
	secretCAKey   = "ca.key"
	secretTLSCert = corev1.TLSCertKey
	secretTLSKey  = corev1.TLSPrivateKeyKey
)

// renewEvery is how often a running controller checks its Secret's certificate.
const renewEvery = 12 * time.Hour

// FromSecret returns the certificates of the Secret name, made or renewed first when it does
// not serve hosts for long enough. A goroutine checks it again every 12 hours until ctx ends.
func FromSecret(ctx context.Context, secrets corev1client.SecretInterface, name string, hosts []string) (*Certs, error) {
	c := &Certs{}
	if err := c.fromSecret(ctx, secrets, name, hosts, time.Now()); err != nil {
		return nil, err
	}
	go every(ctx, renewEvery, func() {
		if err := c.fromSecret(ctx, secrets, name, hosts, time.Now()); err != nil {
			klog.FromContext(ctx).Error(err, "Renewing the progress endpoint's certificate", "secret", name)
		}
	})
	return c, nil
}

func (c *Certs) fromSecret(ctx context.Context, secrets corev1client.SecretInterface, name string, hosts []string, now time.Time) error {
	logger := klog.FromContext(ctx).WithValues("secret", name)
	for range 5 {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			data, err := secretData(nil, hosts, now)
			if err != nil {
				return err
			}
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "t9k-job-controller"}},
				Type: corev1.SecretTypeTLS, Data: data}
			created, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				continue // another replica made it first
			}
			if err != nil {
				return fmt.Errorf("creating the Secret %s of the progress endpoint's certificate: %w", name, err)
			}
			logger.Info("Made the progress endpoint's CA and certificate", "hosts", hosts)
			return c.load(created)
		case err != nil:
			return fmt.Errorf("reading the Secret %s of the progress endpoint's certificate: %w", name, err)
		}
		if good(s.Data, hosts, now) {
			return c.load(s)
		}
		data, err := secretData(s.Data, hosts, now)
		if err != nil {
			return err
		}
		s = s.DeepCopy()
		s.Data = data
		updated, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) {
			continue // another replica renewed it first
		}
		if err != nil {
			return fmt.Errorf("renewing the progress endpoint's certificate in the Secret %s: %w", name, err)
		}
		leaf, _ := parseCert(data[secretTLSCert])
		logger.Info("Renewed the progress endpoint's certificate", "hosts", hostsOf(leaf), "notAfter", leaf.NotAfter)
		return c.load(updated)
	}
	return errors.New("the Secret of the progress endpoint's certificate kept changing under the controller")
}

func (c *Certs) load(s *corev1.Secret) error {
	_, err := c.set(s.Data[secretTLSCert], s.Data[secretTLSKey], s.Data[secretCACert])
	return err
}

// good tells whether a Secret's data serves hosts, with a serving certificate signed by its
// CA that has time left, each key the one of its certificate: a Secret whose tls.key (or
// ca.key) belongs to another certificate (edited by hand, restored from another cluster) would
// make every start fail, or every renewal sign what pods cannot trust, so it is made again.
func good(data map[string][]byte, hosts []string, now time.Time) bool {
	ca, err := parseCert(data[secretCACert])
	if err != nil || now.Add(caRenewBefore).After(ca.NotAfter) || !keyPair(data[secretCACert], data[secretCAKey]) {
		return false
	}
	leaf, err := parseCert(data[secretTLSCert])
	if err != nil || now.Add(servingRenewBefore).After(leaf.NotAfter) || leaf.CheckSignatureFrom(ca) != nil || !covers(leaf, hosts) {
		return false
	}
	return keyPair(data[secretTLSCert], data[secretTLSKey])
}

// keyPair reports whether a PEM key is the private key of a PEM certificate.
func keyPair(certPEM, keyPEM []byte) bool {
	_, err := tls.X509KeyPair(certPEM, keyPEM)
	return err == nil
}

// secretData makes a Secret's data: the CA of old when it has time left, else a new one, and a
// serving certificate for hosts and every host old's served.
func secretData(old map[string][]byte, hosts []string, now time.Time) (map[string][]byte, error) {
	caPEM, caKeyPEM := old[secretCACert], old[secretCAKey]
	ca, errCert := parseCert(caPEM)
	caKey, errKey := parseKey(caKeyPEM)
	if errCert != nil || errKey != nil || !keyPair(caPEM, caKeyPEM) || now.Add(caRenewBefore).After(ca.NotAfter) {
		var err error
		if caPEM, caKeyPEM, err = newCA(now); err != nil {
			return nil, err
		}
		ca, _ = parseCert(caPEM)
		caKey, _ = parseKey(caKeyPEM)
	}
	all := append([]string(nil), hosts...)
	if leaf, err := parseCert(old[secretTLSCert]); err == nil {
		for _, h := range hostsOf(leaf) {
			if !slices.Contains(all, h) {
				all = append(all, h)
			}
		}
	}
	certPEM, keyPEM, err := newServing(ca, caKey, all, now)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{secretCACert: caPEM, secretCAKey: caKeyPEM, secretTLSCert: certPEM, secretTLSKey: keyPEM}, nil
}
