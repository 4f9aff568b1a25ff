package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/t9k-jobs/t9k-jobs/pkg/client/clientset/versioned"
	"github.com/t9k-jobs/t9k-jobs/pkg/controller/engine"
	"github.com/t9k-jobs/t9k-jobs/pkg/progress"
)

// progressOptions are the flags of the progress endpoint (docs/progress.md, "Flags").
type progressOptions struct {
	address  string
	url      string
	service  string
	secret   string
	certFile string
	keyFile  string
	caFile   string
	hosts    []string
	interval time.Duration
}

func (p *progressOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.address, "progress-bind-address", ":10443", `address of the progress endpoint, where jobs' pods report their progress over HTTPS (docs/progress.md); "0" turns it off, and pods are then told of none`)
	fs.StringVar(&p.url, "progress-url", "", "the endpoint's base URL as pods reach it; https://<--progress-service>.<the controller's namespace>.svc:<port of --progress-bind-address> when empty")
	fs.StringVar(&p.service, "progress-service", "t9k-job-controller", "the controller's Service, which the default --progress-url and the certificate's names use")
	fs.StringVar(&p.secret, "progress-tls-secret", "t9k-job-controller-progress-tls",
		"[namespace/]name of the Secret of the endpoint's CA and serving certificate, made (or renewed) by the controller; the namespace is the controller's own when left out")
	fs.StringVar(&p.certFile, "progress-tls-cert-file", "", "serve this certificate (PEM) instead of the Secret's; read again every minute")
	fs.StringVar(&p.keyFile, "progress-tls-key-file", "", "the key of --progress-tls-cert-file")
	fs.StringVar(&p.caFile, "progress-tls-ca-file", "", "the CA pods trust --progress-tls-cert-file by; the certificate file itself when empty")
	fs.StringSliceVar(&p.hosts, "progress-tls-hosts", nil, "more DNS names and IP addresses for the certificate the controller makes (the Service's names and --progress-url's host are always in it)")
	fs.DurationVar(&p.interval, "progress-write-interval", progress.DefaultWriteInterval, "the least time between two status writes of one job's progress; reports in between are written together")
}

func (p *progressOptions) enabled() bool { return p.address != "0" && p.address != "" }

// check refuses flags that cannot work together.
func (p *progressOptions) check() error {
	if !p.enabled() {
		return nil
	}
	if _, _, err := net.SplitHostPort(p.address); err != nil {
		return fmt.Errorf("--progress-bind-address=%q: %w", p.address, err)
	}
	if p.interval <= 0 {
		return fmt.Errorf("--progress-write-interval=%s: want more than 0", p.interval)
	}
	if (p.certFile == "") != (p.keyFile == "") {
		return errors.New("--progress-tls-cert-file and --progress-tls-key-file go together")
	}
	if p.url != "" {
		u, err := url.Parse(p.url)
		if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			return fmt.Errorf("--progress-url=%q: want https://host[:port], no path", p.url)
		}
	}
	return nil
}

// baseURL is --progress-url, or the Service's in the controller's namespace.
func (p *progressOptions) baseURL(namespace string) string {
	if p.url != "" {
		return strings.TrimSuffix(p.url, "/")
	}
	_, port, _ := net.SplitHostPort(p.address)
	return fmt.Sprintf("https://%s.%s.svc:%s", p.service, namespace, port)
}

// certHosts are the names and addresses the certificate the controller makes is for: the
// Service's names, the base URL's host, and --progress-tls-hosts.
func (p *progressOptions) certHosts(namespace string) []string {
	svc := p.service + "." + namespace
	hosts := []string{p.service, svc, svc + ".svc", svc + ".svc.cluster.local"}
	if u, err := url.Parse(p.baseURL(namespace)); err == nil {
		hosts = append(hosts, u.Hostname())
	}
	hosts = append(hosts, p.hosts...)
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// ownNamespace is the controller's namespace: its pod's, else the Lease's flag, else default.
func ownNamespace(o options) string {
	if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(data))
	}
	if o.leaseNamespace != "" {
		return o.leaseNamespace
	}
	return "default"
}

// startProgress starts the progress endpoint, on every replica (not only the one that
// leads): it reads the jobs and pods from the informers the engine shares (started here, so
// that a standby has them too), and writes with clients outside the write fence (kube and
// jobs): its writes are merge patches at a resourceVersion, which no other writer's can be
// lost to. It returns what the engine tells pods, nil when the endpoint is off.
func startProgress(ctx context.Context, o options, kube kubernetes.Interface, jobs versioned.Interface, scopes []scope) (*engine.ProgressEndpoint, error) {
	p := o.progress
	if !p.enabled() {
		return nil, nil
	}
	namespace := ownNamespace(o)
	var certs *progress.Certs
	var err error
	if p.certFile != "" {
		certs, err = progress.FromFiles(ctx, p.certFile, p.keyFile, p.caFile)
	} else {
		ns, name, found := strings.Cut(p.secret, "/")
		if !found {
			ns, name = namespace, p.secret
		}
		certs, err = progress.FromSecret(ctx, kube.CoreV1().Secrets(ns), name, p.certHosts(namespace))
	}
	if err != nil {
		return nil, fmt.Errorf("%w (--progress-bind-address=0 turns the progress endpoint off)", err)
	}
	source, err := progressSource(jobs, scopes)
	if err != nil {
		return nil, err
	}
	server := progress.New(progress.Config{Addr: p.address, Kinds: source.Kinds, Pods: source.Pods,
		TokenReviews: kube.AuthenticationV1().TokenReviews(), Certs: certs, WriteInterval: p.interval})
	if err := server.Start(ctx); err != nil {
		return nil, err
	}
	for _, s := range scopes {
		s.jobs.Start(ctx.Done())
		s.children.Kube.Start(ctx.Done())
	}
	return &engine.ProgressEndpoint{URL: p.baseURL(namespace), CA: certs.CA, WriteInterval: p.interval}, nil
}
