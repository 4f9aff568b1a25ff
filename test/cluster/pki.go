package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// KubeletTLS are the files of the TLS between the API server and the kubelets of this
// cluster (the real node's, realnode.go): the cluster's CA, which issues the kubelets'
// serving certificates (the API server verifies them with it) and the API server's client
// certificate towards kubelets, the only client certificate it issues, so that a kubelet
// trusts that CA as its --client-ca-file; and that client certificate.
type KubeletTLS struct {
	ClientCAFile string
	// APIServerCertFile and APIServerKeyFile are the API server's client certificate
	// towards kubelets, for tests that stand in for it.
	APIServerCertFile, APIServerKeyFile string
}

// The cluster's certificates, under <dir>/pki.
const (
	pkiDir = "pki"
	// caName signs the API server's kubelet client certificate, its serving certificate, and
	// the real node's kubelet serving certificate (writeRealNodeCert).
	caName = "ca"
	// kubeletClientName is the API server's client certificate towards kubelets.
	kubeletClientName = "apiserver-kubelet-client"
	// apiServerName is the API server's serving certificate: for loopback, the real node's
	// address, and the kubernetes Service's address and names, as pods call it.
	apiServerName = "apiserver"
)

// Kubelet is the TLS files between this cluster's API server and its kubelets.
func (c *Cluster) Kubelet() KubeletTLS {
	p := func(name, ext string) string { return filepath.Join(c.Dir, pkiDir, name+ext) }
	return KubeletTLS{ClientCAFile: p(caName, ".crt"), APIServerCertFile: p(kubeletClientName, ".crt"), APIServerKeyFile: p(kubeletClientName, ".key")}
}

// writePKI makes the cluster's CA, the API server's serving certificate and its client
// certificate towards kubelets. Keys are readable by their owner only.
func (c *Cluster) writePKI() error {
	dir := filepath.Join(c.Dir, pkiDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTemplate := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "t9k-local-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	caCert, err := issue(dir, caName, caTemplate, caKey, nil, nil)
	if err != nil {
		return err
	}
	for name, template := range map[string]*x509.Certificate{
		kubeletClientName: {
			Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		apiServerName: {
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(RealNodeIP), net.ParseIP(kubernetesServiceIP)},
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc." + clusterDomain},
		},
	} {
		template.NotBefore, template.NotAfter = now.Add(-time.Hour), now.AddDate(1, 0, 0)
		template.KeyUsage = x509.KeyUsageDigitalSignature
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		if _, err := issue(dir, name, template, key, caCert, caKey); err != nil {
			return err
		}
	}
	return nil
}

// readCA reads the cluster's CA from dir.
func readCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, caName+".crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caName+".key"))
	if err != nil {
		return nil, nil, err
	}
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, nil, fmt.Errorf("%s: not PEM", dir)
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	return cert, key, err
}

// issue signs template with the CA (itself when ca is nil) and writes <name>.crt and
// <name>.key. Keys are ECDSA, or RSA where a reader accepts nothing else (kueue.go).
func issue(dir, name string, template *x509.Certificate, key crypto.Signer, ca *x509.Certificate, caKey crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	template.SerialNumber = serial
	if ca == nil {
		ca, caKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	var keyPEM *pem.Block
	switch key := key.(type) {
	case *ecdsa.PrivateKey:
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		keyPEM = &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}
	case *rsa.PrivateKey:
		keyPEM = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	default:
		return nil, fmt.Errorf("%s: unsupported key type %T", name, key)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(keyPEM), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}
