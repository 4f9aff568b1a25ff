package progress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultWriteInterval is the least time between two status writes of a job's progress.
const DefaultWriteInterval = 5 * time.Second

// writers write jobs' statuses at once: a write waits for the API server, not for the CPU.
const writers = 4

// Config is what the server needs. Every replica of the controller serves (not only the
// leader): its writes are merge patches at a resourceVersion, safe from any number of
// writers, and a standby that answers is a Service endpoint that works.
type Config struct {
	// Addr is the address to listen on, e.g. ":10443".
	Addr string
	// Kinds are the job kinds, read from the informer caches the engine shares.
	Kinds []Kind
	// Pods are the jobs' pods, from the engine's cache.
	Pods Pods
	// TokenReviews reviews the pods' tokens.
	TokenReviews authenticationclient.TokenReviewInterface
	// Certs is the serving certificate.
	Certs *Certs
	// WriteInterval is the least time between two status writes of a job (0: the default).
	WriteInterval time.Duration
	// Clock is the time (nil: the real one).
	Clock clock.WithTicker
}

// Server is the progress endpoint.
type Server struct {
	config  Config
	handler *handler
}

// New makes the server.
func New(c Config) *Server {
	if c.WriteInterval <= 0 {
		c.WriteInterval = DefaultWriteInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	limits := newLimits(c.Clock.Now)
	h := &handler{kinds: map[string]Kind{}, pods: c.Pods, clock: c.Clock,
		auth: newAuthenticator(c.TokenReviews, c.Clock.Now, limits.allowReview), limits: limits,
		writer: newWriter(c.Kinds, c.Pods, c.WriteInterval, c.Clock)}
	for _, k := range c.Kinds {
		h.kinds[k.Resource] = k
	}
	return &Server{config: c, handler: h}
}

// Handler answers reports (for tests; Start serves it over TLS).
func (s *Server) Handler() http.Handler { return s.handler }

// RunWriter writes the statuses of the reports accepted until ctx ends (Start runs it).
func (s *Server) RunWriter(ctx context.Context) { s.handler.writer.run(ctx, writers) }

// Start listens, then serves and writes in the background until ctx ends. An error to
// listen is returned.
func (s *Server) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	listener, err := net.Listen("tcp", s.config.Addr)
	if err != nil {
		return fmt.Errorf("the progress endpoint: %w", err)
	}
	server := &http.Server{
		Handler:           s.handler,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.config.Certs.GetCertificate},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    32 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go s.RunWriter(ctx)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdown)
	}()
	go func() {
		if err := server.ServeTLS(listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Serving progress reports failed", "address", s.config.Addr)
		}
	}()
	logger.Info("Serving progress reports", "address", listener.Addr().String(), "writeInterval", s.config.WriteInterval)
	return nil
}
