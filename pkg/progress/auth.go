package progress

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// A pod authenticates with a ServiceAccount token bound to it and to its job's audience
// (docs/progress.md, "How a pod authenticates"): the kubelet projects it into the pod, and
// the API server's TokenReview says whose it is. TokenReview also refuses a token whose pod
// is gone (the API server checks the bound object), one past its expiry, and one of another
// audience.

// The extra fields of a TokenReview's user that name the pod a token is bound to.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// How long a TokenReview's answer is reused, by a hash of the token and the audience: an
// accepted token for 45 s to a minute (spread, so that the tokens of a job whose pods started
// together are not all reviewed again in the same second) and never past its expiry, a
// refused one briefly (a client that retries a bad token costs the API server one review in
// that time).
const (
	acceptedTTL = time.Minute
	refusedTTL  = 10 * time.Second
	// maxCached bounds the cache: past it, expired answers go, and if that is not enough, all.
	maxCached = 10000
)

// identity is the pod a token is bound to.
type identity struct {
	// Namespace is the namespace of the token's ServiceAccount, and so of its pod.
	Namespace string
	Pod       string
	PodUID    types.UID
}

// errUnauthenticated is a token TokenReview refused; errNotPods one it accepted that is bound
// to no pod.
var (
	errUnauthenticated = errors.New("the token is not valid for this job: expired, of another audience, or its pod is gone")
	errNotPods         = errors.New("the token is bound to no pod: present the token projected into the job's pod")
)

// tooManyReviews is a token not reviewed for the limit of TokenReviews (limit.go).
type tooManyReviews struct{ wait time.Duration }

func (e *tooManyReviews) Error() string { return "too many tokens to review: try again later" }

type authenticator struct {
	reviews authenticationclient.TokenReviewInterface
	now     func() time.Time
	// allow takes a token of the TokenReviews' bucket (0), or says how long to wait.
	allow func() time.Duration

	mu    sync.Mutex
	cache map[[32]byte]answer
}

type answer struct {
	id      *identity
	err     error
	expires time.Time
}

func newAuthenticator(reviews authenticationclient.TokenReviewInterface, now func() time.Time, allow func() time.Duration) *authenticator {
	return &authenticator{reviews: reviews, now: now, allow: allow, cache: map[[32]byte]answer{}}
}

// authenticate returns the pod token is bound to, when TokenReview accepts it for audience.
// It returns errUnauthenticated or errNotPods for a token refused, a *tooManyReviews past the
// limit of reviews, and another error when TokenReview could not be asked (neither cached).
func (a *authenticator) authenticate(ctx context.Context, token, audience string) (*identity, error) {
	key := sha256.Sum256([]byte(audience + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	if c, ok := a.cache[key]; ok && now.Before(c.expires) {
		a.mu.Unlock()
		return c.id, c.err
	}
	a.mu.Unlock()
	if wait := a.allow(); wait > 0 {
		return nil, &tooManyReviews{wait: wait}
	}
	review, err := a.reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token: token, Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		tokenReviews.WithLabelValues("error").Inc()
		return nil, err
	}
	id, err := identityOf(review, audience)
	c := answer{id: id, err: err, expires: now.Add(refusedTTL)}
	result := "refused"
	if err == nil {
		result = "accepted"
		c.expires = now.Add(acceptedTTL - rand.N(acceptedTTL/4))
		if exp, ok := expiry(token); ok && exp.Before(c.expires) {
			c.expires = exp
		}
	}
	tokenReviews.WithLabelValues(result).Inc()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= maxCached {
		for k, v := range a.cache {
			if !now.Before(v.expires) {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= maxCached {
			a.cache = map[[32]byte]answer{}
		}
	}
	a.cache[key] = c
	return id, err
}

// identityOf reads the pod from an answered TokenReview.
func identityOf(review *authenticationv1.TokenReview, audience string) (*identity, error) {
	s := review.Status
	if !s.Authenticated || s.Error != "" {
		return nil, errUnauthenticated
	}
	audienceOK := false
	for _, a := range s.Audiences {
		audienceOK = audienceOK || a == audience
	}
	if !audienceOK {
		return nil, errUnauthenticated
	}
	rest, ok := strings.CutPrefix(s.User.Username, "system:serviceaccount:")
	ns, _, _ := strings.Cut(rest, ":")
	pod, uid := s.User.Extra[extraPodName], s.User.Extra[extraPodUID]
	if !ok || ns == "" || len(pod) != 1 || len(uid) != 1 || pod[0] == "" || uid[0] == "" {
		return nil, errNotPods
	}
	return &identity{Namespace: ns, Pod: pod[0], PodUID: types.UID(uid[0])}, nil
}

// expiry reads a JWT's exp claim, unverified: only to keep the cache from outliving the token
// that TokenReview verified.
func expiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(*claims.Exp, 0), true
}
