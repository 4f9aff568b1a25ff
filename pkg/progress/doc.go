// Package progress is the controller's progress endpoint: replicas of a job report how far
// their training has come (step, epoch, a few metrics, an estimate of the time left) with the
// request Kubeflow Trainer's pods send (KEP-2779), and the job's status.progress shows it.
//
// One file a concern: path.go (the URL and the token's audience), report.go (the request
// body), auth.go (TokenReview and its cache), limit.go (rate limits), handler.go (the order
// of the checks and the answers), merge.go (a job's progress from its replicas' reports),
// writer.go (status writes, coalesced per job), kinds.go (the five kinds' caches and status
// clients), certs.go and secret.go (the serving certificate), server.go (the HTTPS server),
// metrics.go. docs/progress.md is the user's side of it.
package progress
