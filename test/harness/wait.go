package harness

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitFor polls cond every interval until it holds, returns an error, or timeout passes; the
// error says what it waited for.
func WaitFor(ctx context.Context, what string, interval, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	if err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
