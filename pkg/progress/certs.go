package progress

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"time"
)

// Certs are the endpoint's serving certificate and the CA that pods trust it by, as they are
// now: a renewal or new files replace them while the server runs (docs/progress.md, "TLS").
type Certs struct {
	current atomic.Pointer[certPair]
}

type certPair struct {
	cert *tls.Certificate
	ca   []byte // PEM
}

// GetCertificate is the server's tls.Config.GetCertificate.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if p := c.current.Load(); p != nil {
		return p.cert, nil
	}
	return nil, errors.New("no serving certificate")
}

// CA is the PEM of the CA that pods trust the endpoint by: what each job's
// <job>-progress-ca ConfigMap holds.
func (c *Certs) CA() []byte {
	if p := c.current.Load(); p != nil {
		return p.ca
	}
	return nil
}

// set replaces the certificate and CA; it reports whether they changed.
func (c *Certs) set(certPEM, keyPEM, caPEM []byte) (bool, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, err
	}
	if p := c.current.Load(); p != nil && bytes.Equal(p.cert.Certificate[0], cert.Certificate[0]) && bytes.Equal(p.ca, caPEM) {
		return false, nil
	}
	c.current.Store(&certPair{cert: &cert, ca: caPEM})
	return true, nil
}

// Validity of what the controller makes itself: a CA of ten years, a serving certificate of
// one, renewed once it has less than 90 days left (the CA: one year).
const (
	caValidity         = 10 * 365 * 24 * time.Hour
	servingValidity    = 365 * 24 * time.Hour
	servingRenewBefore = 90 * 24 * time.Hour
	caRenewBefore      = 365 * 24 * time.Hour
)

// newCA makes a self-signed CA.
func newCA(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "t9k-job-controller progress CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

// newServing makes a serving certificate for hosts (DNS names and IP addresses), signed by
// the CA.
func newServing(ca *x509.Certificate, caKey crypto.Signer, hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "t9k-job-controller progress"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     earliest(now.Add(servingValidity), ca.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	return encode(der, key)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// parseCert reads the first certificate of a PEM.
func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// parseKey reads a PEM private key (EC, PKCS #8 or PKCS #1).
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T key cannot sign", k)
	}
	return signer, nil
}

// hostsOf are the DNS names and IP addresses a certificate is for.
func hostsOf(c *x509.Certificate) []string {
	hosts := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return hosts
}

// covers tells whether a certificate is valid for every host.
func covers(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if c.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}
