// Package charts holds the Helm chart of t9k-jobs (charts/t9k-jobs) and the test that holds it
// to manifests/: rendered with its defaults it is install.yaml's objects, and namespaced, the
// namespaced install's (docs/install.md, "With Helm").
package charts
