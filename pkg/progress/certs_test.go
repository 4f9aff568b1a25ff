package progress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var hosts = []string{"t9k-job-controller.t9k-system.svc", "10.245.0.1"}

// TestSecretMadeOnceAndShared: the first start makes the Secret (a CA and a certificate for
// the hosts); a second replica reads the same; one that needs another host renews the
// serving certificate for both replicas' hosts with the same CA.
func TestSecretMadeOnceAndShared(t *testing.T) {
	kube := kubefake.NewClientset()
	secrets := kube.CoreV1().Secrets("t9k-system")
	ctx := context.Background()
	first := &Certs{}
	if err := first.fromSecret(ctx, secrets, "tls", hosts, time.Now()); err != nil {
		t.Fatal(err)
	}
	second := &Certs{}
	if err := second.fromSecret(ctx, secrets, "tls", hosts, time.Now()); err != nil {
		t.Fatal(err)
	}
	if string(first.CA()) != string(second.CA()) || leaf(t, first).SerialNumber.Cmp(leaf(t, second).SerialNumber) != 0 {
		t.Error("the second replica serves another certificate")
	}
	checkServes(t, first, hosts...)

	third := &Certs{}
	if err := third.fromSecret(ctx, secrets, "tls", []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if string(third.CA()) != string(first.CA()) {
		t.Error("a new host changed the CA")
	}
	checkServes(t, third, append(hosts, "127.0.0.1")...)

	// A year before the CA's end, a new CA; 90 days before the serving certificate's, a new one.
	later := &Certs{}
	if err := later.fromSecret(ctx, secrets, "tls", hosts, time.Now().Add(servingValidity-servingRenewBefore+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if string(later.CA()) != string(first.CA()) || leaf(t, later).SerialNumber.Cmp(leaf(t, third).SerialNumber) == 0 {
		t.Error("a certificate near its end was not renewed under the same CA")
	}
	if err := later.fromSecret(ctx, secrets, "tls", hosts, time.Now().Add(caValidity-caRenewBefore+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if string(later.CA()) == string(first.CA()) {
		t.Error("a CA near its end was kept")
	}
}

// TestMismatchedSecretIsMadeAgain: a Secret whose tls.key is another certificate's, or whose
// ca.key is another CA's, is made again at start, rather than failing every start or signing
// what pods cannot trust.
func TestMismatchedSecretIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	other, err := secretData(nil, hosts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{secretTLSKey, secretCAKey} {
		kube := kubefake.NewClientset()
		secrets := kube.CoreV1().Secrets("t9k-system")
		if err := (&Certs{}).fromSecret(ctx, secrets, "tls", hosts, time.Now()); err != nil {
			t.Fatal(err)
		}
		s, err := secrets.Get(ctx, "tls", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[key] = other[key]
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		c := &Certs{}
		if err := c.fromSecret(ctx, secrets, "tls", hosts, time.Now()); err != nil {
			t.Fatalf("%s of another certificate: %v", key, err)
		}
		checkServes(t, c, hosts...)
		repaired, _ := secrets.Get(ctx, "tls", metav1.GetOptions{})
		if !keyPair(repaired.Data[secretTLSCert], repaired.Data[secretTLSKey]) || !keyPair(repaired.Data[secretCACert], repaired.Data[secretCAKey]) {
			t.Errorf("%s of another certificate: the Secret was not made whole again", key)
		}
	}
}

// TestSecretRace: replicas that start together both find no Secret; the one whose create
// loses reads the winner's.
func TestSecretRace(t *testing.T) {
	kube := kubefake.NewClientset()
	var once sync.Once
	kube.PrependReactor("create", "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		handled := false
		once.Do(func() {
			// Another replica's create lands first.
			other := &Certs{}
			if err := other.fromSecret(context.Background(), kubefake.NewClientset().CoreV1().Secrets("t9k-system"), "tls", hosts, time.Now()); err != nil {
				t.Error(err)
			}
			data, _ := secretData(nil, hosts, time.Now())
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "t9k-system"}, Data: data}
			if err := kube.Tracker().Add(s); err != nil {
				t.Error(err)
			}
			handled = true
		})
		if handled {
			return true, nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), "tls")
		}
		return false, nil, nil
	})
	c := &Certs{}
	if err := c.fromSecret(context.Background(), kube.CoreV1().Secrets("t9k-system"), "tls", hosts, time.Now()); err != nil {
		t.Fatal(err)
	}
	s, _ := kube.CoreV1().Secrets("t9k-system").Get(context.Background(), "tls", metav1.GetOptions{})
	if string(c.CA()) != string(s.Data[secretCACert]) {
		t.Error("the replica whose create lost does not serve the winner's certificate")
	}
}

// TestFiles: a certificate from files, its CA the certificate file's own when none is given,
// and a TLS client that trusts that CA reaches the endpoint at 127.0.0.1.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	data, err := secretData(nil, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	chain := append(append([]byte(nil), data[secretTLSCert]...), data[secretCACert]...)
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, data[secretTLSKey], 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := FromFiles(ctx, certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	checkServes(t, c, "127.0.0.1")
	if _, err := FromFiles(ctx, certFile, filepath.Join(dir, "missing"), ""); err == nil {
		t.Error("a missing key file was taken")
	}
}

func leaf(t *testing.T, c *Certs) *x509.Certificate {
	t.Helper()
	cert, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkServes: a TLS client that trusts only c's CA accepts c's certificate for each host,
// through a real handshake.
func checkServes(t *testing.T, c *Certs, hosts ...string) {
	t.Helper()
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	// The certificate itself, not GetCertificate: httptest would add its own, which a client
	// that sends no server name (an IP address) would be given.
	cert, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	server.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	server.StartTLS()
	defer server.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CA()) {
		t.Fatal("the CA is no PEM certificate")
	}
	for _, h := range hosts {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: h}}}
		resp, err := client.Get(server.URL)
		if err != nil {
			t.Errorf("%s: %v", h, err)
			continue
		}
		resp.Body.Close()
	}
	if !strings.HasPrefix(string(c.CA()), "-----BEGIN CERTIFICATE-----") {
		t.Error("the CA is not PEM")
	}
}
