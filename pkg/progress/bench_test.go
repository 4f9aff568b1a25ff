package progress

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkReport is the time the endpoint takes to answer a report whose token's review is
// cached (the common case: a pod reports with the same token for an hour), the write left to
// the writer.
func BenchmarkReport(b *testing.B) {
	f := newFixture(b)
	token := f.podToken("job-worker-0")
	data := body(1, start)
	for b.Loop() {
		f.clock.Step(time.Second) // within the pod's rate
		if rec := f.post("job", token, data); rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkReportOverTLS is a report as the helper sends it: a new TLS connection each time
// (Python's urllib keeps none), to the endpoint's certificate.
func BenchmarkReportOverTLS(b *testing.B) {
	f := newFixture(b)
	data, err := secretData(nil, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	certs := &Certs{}
	if _, err := certs.set(data[secretTLSCert], data[secretTLSKey], data[secretCACert]); err != nil {
		b.Fatal(err)
	}
	server := httptest.NewUnstartedServer(f.server.Handler())
	cert, _ := certs.GetCertificate(nil)
	server.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	server.StartTLS()
	defer server.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CA())
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	token := f.podToken("job-worker-0")
	report := body(1, start)
	for b.Loop() {
		f.clock.Step(time.Second)
		req, _ := http.NewRequest(http.MethodPost, server.URL+Path(ref("job")), strings.NewReader(report))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
}
