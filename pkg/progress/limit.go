package progress

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// Rate limits (docs/progress.md, "Limits"): each pod may report 2 times a second with bursts
// of 10, far more than a report a second needs; all pods together 1,000 a second with bursts
// of 2,000 (5,000 pods at the helper's default of a report every 5 s); and the reports whose
// token's review is not cached, 200 a second with bursts of 1,000, which bounds what a flood
// of tokens costs the API server (a report refused by a limit costs no review) and lets the
// first reports of a job of 1,000 pods through at once.
const (
	podRate     = rate.Limit(2)
	podBurst    = 10
	totalRate   = rate.Limit(1000)
	totalBurst  = 2000
	reviewRate  = rate.Limit(200)
	reviewBurst = 1000
	// idleLimiter: a pod's bucket unused this long is full again, and forgotten.
	idleLimiter = time.Minute
)

// limits are the token buckets: one overall, one of TokenReviews, one per pod.
type limits struct {
	now     func() time.Time
	total   *rate.Limiter
	reviews *rate.Limiter

	mu    sync.Mutex
	pods  map[types.UID]*podLimiter
	swept time.Time
}

type podLimiter struct {
	*rate.Limiter
	used time.Time
}

func newLimits(now func() time.Time) *limits {
	return &limits{now: now, total: rate.NewLimiter(totalRate, totalBurst), reviews: rate.NewLimiter(reviewRate, reviewBurst),
		pods: map[types.UID]*podLimiter{}, swept: now()}
}

// allowTotal takes a token of the overall bucket; it returns 0, or how long to wait.
func (l *limits) allowTotal() time.Duration { return take(l.total, l.now()) }

// allowReview takes a token of the TokenReviews' bucket; it returns 0, or how long to wait.
func (l *limits) allowReview() time.Duration { return take(l.reviews, l.now()) }

// allowPod takes a token of the pod's bucket; it returns 0, or how long to wait.
func (l *limits) allowPod(uid types.UID) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > idleLimiter {
		for k, p := range l.pods {
			if now.Sub(p.used) > idleLimiter {
				delete(l.pods, k)
			}
		}
		l.swept = now
	}
	p := l.pods[uid]
	if p == nil {
		p = &podLimiter{Limiter: rate.NewLimiter(podRate, podBurst)}
		l.pods[uid] = p
	}
	p.used = now
	return take(p.Limiter, now)
}

// take takes a token if there is one; otherwise it takes none and says when there will be.
func take(l *rate.Limiter, now time.Time) time.Duration {
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// retryAfter is a wait in whole seconds, at least 1, for the Retry-After header.
func retryAfter(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }
