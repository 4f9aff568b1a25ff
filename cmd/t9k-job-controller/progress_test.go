package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProgressFlags: the endpoint's default URL is the Service's in the controller's
// namespace, the certificate it makes is for the Service's names and the URL's host, and
// flags that cannot work are refused naming the flag.
func TestProgressFlags(t *testing.T) {
	p := progressOptions{address: ":10443", service: "t9k-job-controller", interval: 5 * time.Second, hosts: []string{"10.0.0.7"}}
	if err := p.check(); err != nil {
		t.Fatal(err)
	}
	if got := p.baseURL("t9k-system"); got != "https://t9k-job-controller.t9k-system.svc:10443" {
		t.Errorf("the default URL: %s", got)
	}
	want := []string{"10.0.0.7", "t9k-job-controller", "t9k-job-controller.t9k-system", "t9k-job-controller.t9k-system.svc", "t9k-job-controller.t9k-system.svc.cluster.local"}
	if got := p.certHosts("t9k-system"); !slices.Equal(got, want) {
		t.Errorf("the certificate's hosts: %v, want %v", got, want)
	}
	p.url = "https://10.245.0.1:4443/"
	if got := p.baseURL("t9k-system"); got != "https://10.245.0.1:4443" {
		t.Errorf("--progress-url: %s", got)
	}
	if got := p.certHosts("t9k-system"); !slices.Contains(got, "10.245.0.1") {
		t.Errorf("the certificate is not for --progress-url's host: %v", got)
	}

	for _, tc := range []struct {
		change func(*progressOptions)
		flag   string
	}{
		{func(p *progressOptions) { p.address = "10443" }, "--progress-bind-address"},
		{func(p *progressOptions) { p.interval = 0 }, "--progress-write-interval"},
		{func(p *progressOptions) { p.certFile = "tls.crt" }, "--progress-tls-cert-file"},
		{func(p *progressOptions) { p.url = "http://10.245.0.1:4443" }, "--progress-url"},
		{func(p *progressOptions) { p.url = "https://10.245.0.1:4443/status" }, "--progress-url"},
	} {
		o := p
		tc.change(&o)
		if err := o.check(); err == nil || !strings.HasPrefix(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", o, err, tc.flag)
		}
	}
	off := progressOptions{address: "0", interval: 0}
	if off.enabled() || off.check() != nil {
		t.Error(`--progress-bind-address=0 does not turn the endpoint off`)
	}
}
