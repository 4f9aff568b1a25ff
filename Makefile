# t9k-jobs: see README.md. Every target works on a fresh machine with Go; the local control
# plane's binaries are built on first use and cached (hack/lib/tools.sh).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

# Every Go build of the project is made as the image's is: static and trimmed. Go's build
# cache keys a package by its flags, so one setting for go vet, the tests' binaries, the
# controller the end-to-end tests run, the tools built against Kubernetes' libraries
# (hack/lib/tools.sh builds them so too) and the image's amd64 build lets each reuse what
# the others compiled (docs/testing.md, "One build of a package"). Only the race detector's
# build differs: it needs cgo.
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(GOFLAGS)))

# The compiler's garbage collector target, for the runs that only compile: the tools, go vet
# and code generation, and the compiles make test starts ahead of its tests. At 400 a cold
# compile of the controller takes a fifth less CPU (169 CPU-seconds instead of 210-222) for a
# few hundred MiB more at a time. Never in the environment of a program under test: the
# controller reads GOGC (docs/install.md, "Memory"). The build cache does not key on it.
COMPILE_GOGC ?= 400
COMPILE = GOGC=$(COMPILE_GOGC)

CLUSTER_DIR ?= _output/cluster
# KUEUE=1: make cluster-up and make run also start Kueue (docs/queueing.md). WORKERS=N, with
# KUEUE=1: make cluster-up also starts N MultiKueue worker clusters, connected to it.
KUEUE ?=
WORKERS ?=
# REAL_NODE=1: make cluster-up also starts the real node (root; docs/testing.md), with the
# training image imported.
REAL_NODE ?=
# Packages whose tests need no cluster.
UNIT_PKGS = $$(go list ./... | grep -v /test/e2e)
# The controller's own packages, whose unit tests run under the race detector (docs/testing.md,
# "make test"); the rest (the manifests' CEL rules, the tools under hack/, the clusters' tests
# under test/) run without: they share no memory between goroutines of the project's, and the
# detector made the manifests' alone take a minute.
RACE_PKGS = ./pkg/... ./cmd/...
# The image's tests build the controller for two platforms: mostly compiling, which make test
# runs beside the end-to-end tests at the lowest priority, as it runs the unit tests.
IMAGE_PKGS = ./hack/image/...
OTHER_PKGS = $$(go list ./... | grep -v '/t9k-jobs/\(pkg/\|cmd/\|hack/image\)')
# go test's -timeout, per test binary: the end-to-end tests take 3-5 minutes on 2 cores, so
# a hang fails after 30 and .ci/run ends well inside CI's 90 (docs/testing.md, "make test").
TEST_TIMEOUT ?= 30m
# How many tests go test may run at once: the end-to-end tests limit themselves by what they
# share (test/e2e/parallel_test.go), and one waiting for a share holds a place here, so this
# is more than their 110 parallel tests: each waits in its share's queue from the start, and
# the real node never idles for want of a test that go test has not let in yet.
TEST_PARALLEL ?= 256

# The controller's image (docs/install.md, "The image"): its name and tag default to those
# manifests/kustomization.yaml gives the Deployment, so a loaded `make image` is what
# `kubectl apply -k manifests/` runs; VERSION is what the binary reports.
IMAGE ?= $(shell sed -n 's/^ *newName: *//p' manifests/kustomization.yaml)
TAG ?= $(shell sed -n 's/^ *newTag: *//p' manifests/kustomization.yaml)
VERSION ?= $(shell hack/version.sh)
IMAGE_ARCHIVE ?= _output/image/t9k-job-controller.oci.tar
# The image's platforms (make image, make release); one is enough for a cluster of one.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: build generate verify test test-unit test-e2e tools images cluster-up cluster-down run bench image push release plugin

build: ## compile everything
	$(COMPILE) go build ./...
	@if [ -d cmd ]; then $(COMPILE) go build -o bin/ ./cmd/...; fi

plugin: ## the kubectl plugin, bin/kubectl-t9k: put it on your PATH to run `kubectl t9k` (docs/kubectl-plugin.md)
	$(COMPILE) go build -o bin/kubectl-t9k ./cmd/kubectl-t9k

generate: ## regenerate clients, deepcopy, OpenAPI and CRDs from pkg/apis
	hack/update-codegen.sh

verify: ## gofmt, go vet, generated code up to date, and one version of each library the builds share
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed: $$bad"; exit 1; fi
	$(COMPILE) go vet ./...
	$(COMPILE) hack/verify-codegen.sh
	$(COMPILE) hack/verify-shared-versions.sh

image: ## build the controller's image, for $(IMAGE_PLATFORMS), as an OCI archive: $(IMAGE_ARCHIVE), named $(IMAGE):$(TAG)
	$(COMPILE) go run ./hack/image build --image $(IMAGE):$(TAG) --version $(VERSION) --platforms $(IMAGE_PLATFORMS) --out $(IMAGE_ARCHIVE) --digest-file $(IMAGE_ARCHIVE).digest

push: image ## build the image and push it, every platform, to $(IMAGE):$(TAG) with your registry credentials (docker login)
	go run ./hack/image push --archive $(IMAGE_ARCHIVE) --image $(IMAGE):$(TAG)

release: ## VERSION=vX.Y.Z: dist/ with install.yaml (the image pinned by digest), the image archive, the monitoring files, the kubectl plugin and its krew manifest, and SHA256SUMS
	IMAGE=$(IMAGE) VERSION=$(VERSION) IMAGE_PLATFORMS=$(IMAGE_PLATFORMS) hack/release.sh

tools: ## build (once) the local control plane's binaries, and Helm for the chart's tests
	@$(COMPILE) hack/lib/tools.sh >/dev/null
	@# Helm (hack/tools/helm) runs as go tool: built once into Go's cache here, so that the
	@# chart's unit test and the end-to-end tests do not both build it at once.
	@$(COMPILE) go -C hack/tools/helm tool helm version >/dev/null

images: ## build (once; root, mmdebstrap) the real node's training image and print its archive (docs/testing.md, "The training image")
	@hack/lib/images.sh

# The tests that need no cluster (the controller's packages under -race, the image's, then the
# fuzzers) run beside the other packages' (the end-to-end tests), at the lowest CPU priority:
# those wait on the cluster most of their time, and these take only what CPU they leave, so
# neither the end-to-end tests' timing nor their own results change, and CI is shorter by
# their minute and a half (docs/testing.md, "make test"). Their chain compiles ahead what it
# then tests (the race build, the arm64 binary) with the compiler's GOGC, which the tests
# must not run under. The go test runs feed one summary, after all end; a run that fails
# without saying so in its JSON (it could not list its packages) is caught by its exit
# status, kept in _output/test-failed. The JSON is kept in _output/test.json: every test's
# time, for finding what makes CI slow.
test: tools ## the controller's unit tests under -race and the fuzzers, beside the rest with the end-to-end tests (they start their own local cluster); then the skipped ones
	@mkdir -p _output; rm -f _output/test-failed _output/test-*.json _output/test-*.log
	@{ CGO_ENABLED=1 $(COMPILE) nice -n 19 go build -race $(RACE_PKGS) >/dev/null 2>&1 || true; \
	   CGO_ENABLED=1 nice -n 19 go test -race -count=1 -timeout $(TEST_TIMEOUT) -json $(RACE_PKGS) >_output/test-unit.json 2>_output/test-unit.log || echo "go test -race $(RACE_PKGS)" >>_output/test-failed; \
	   GOOS=linux GOARCH=arm64 $(COMPILE) nice -n 19 go build -o /dev/null ./cmd/t9k-job-controller >/dev/null 2>&1 || true; \
	   nice -n 19 go test -count=1 -timeout $(TEST_TIMEOUT) -json $(IMAGE_PKGS) >_output/test-image.json 2>>_output/test-unit.log || echo "go test $(IMAGE_PKGS)" >>_output/test-failed; \
	   $(COMPILE) nice -n 19 $(MAKE) --no-print-directory test-fuzz >_output/test-fuzz.log 2>&1 || echo "make test-fuzz" >>_output/test-failed; \
	} & units=$$!; \
	T9K_TOOLS_BIN=$$(hack/lib/tools.sh) go test -count=1 -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) -json $(OTHER_PKGS) >_output/test-others.json || echo "go test (the others, e2e included)" >>_output/test-failed; \
	wait $$units; \
	cat _output/test-unit.log; cat _output/test-unit.json _output/test-image.json _output/test-others.json >_output/test.json; \
	go run ./hack/testsummary <_output/test.json || echo "the summary's count of failed packages" >>_output/test-failed; \
	cat _output/test-fuzz.log
	@if [ -s _output/test-failed ]; then echo "failed: $$(cat _output/test-failed)"; exit 1; fi

test-unit: ## tests that need no cluster (the controller's under -race)
	CGO_ENABLED=1 go test -race -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS)
	go test -count=1 -timeout $(TEST_TIMEOUT) $$(go list $(OTHER_PKGS) | grep -v /test/e2e)

test-e2e: tools ## end-to-end tests on a local cluster (or on $T9K_E2E_KUBECONFIG's)
	T9K_TOOLS_BIN=$$(hack/lib/tools.sh) go test -count=1 -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) -v ./test/e2e/

cluster-up: tools ## start the local control plane in the background; prints its kubeconfig
	go run ./hack/cluster up --dir $(CLUSTER_DIR) --bin-dir $$(hack/lib/tools.sh) $(if $(filter-out 0,$(KUEUE)),--kueue) $(if $(WORKERS),--workers $(WORKERS)) \
		$(if $(filter-out 0,$(REAL_NODE)),--real-node --image $$(hack/lib/images.sh))

cluster-down: ## stop the local control plane
	go run ./hack/cluster down --dir $(CLUSTER_DIR)

run: ## run the controller: against $KUBECONFIG, or on a local control plane with the examples; KUEUE=1: with Kueue
	KUEUE=$(KUEUE) hack/run.sh

# Go's native fuzzers (docs/testing.md, "Fuzzing"): every func Fuzz... of a _test.go file (what
# go test -list '^Fuzz' ./... lists, without linking every test binary), run one at a time (go
# test takes one -fuzz target per run), each for FUZZTIME; make test runs them for
# TEST_FUZZTIME each, 30 s of fuzzing and about 50 s in all on 2 quiet cores. A crasher is
# written to its package's testdata/fuzz/<Fuzzer>/, and the target fails. Go 1.26's fuzzer
# may fail at its own deadline with "context deadline exceeded" and no failing input
# (golang/go#75804): that is not a finding, does not fail the target, and its output says
# "stopped" where go test said FAIL, so no reader counts it as a failure. The recipe's shell
# runs with -e, so a failing go test is caught in its status (|| rc=...), not left to end the
# loop before its output is shown.
FUZZTIME ?= 10s
TEST_FUZZTIME ?= 5s
.PHONY: fuzz test-fuzz

fuzz: ## run every fuzzer for FUZZTIME each (default 10s; longer: make fuzz FUZZTIME=5m)
	@targets=$$(grep -r --include='*_test.go' --exclude-dir=_output --exclude-dir=.git -o '^func Fuzz[A-Za-z0-9_]*' . | \
		sed 's|^\(.*\)/[^/]*_test.go:func |\1@|' | sort -u); \
	failed=""; \
	for target in $$targets; do \
		pkg=$${target%@*}; name=$${target#*@}; \
		echo "fuzz: $$name ($$pkg) for $(FUZZTIME)"; \
		rc=0; out=$$(go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1) || rc=$$?; \
		if [ $$rc != 0 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
			echo "$$out" | sed -e 's/^--- FAIL: /--- stopped at its deadline: /' -e 's/^FAIL/stopped/'; \
			echo "fuzz: $$name: no input failed; Go's fuzzer stopped on its own -fuzztime deadline (golang/go#75804, fixed in Go 1.27)"; rc=0; \
		else \
			echo "$$out"; \
		fi; \
		[ $$rc = 0 ] || failed="$$failed $$name"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashers in:$$failed (see testdata/fuzz/ of their packages)"; exit 1; fi

test-fuzz: ## every fuzzer for TEST_FUZZTIME (5s) each, as make test runs them
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

BENCH_JOBS ?= 250
BENCH_REPLICAS ?= 4
BENCH_QPS ?= 200
BENCH_BURST ?= 400
BENCH_ROUNDS ?= 3
BENCH_KIND ?= GenericJob
BENCH_FINISHED ?= 0
BENCH_SCALE ?= 0
BENCH_SCALE_STEP ?= 1000
BENCH_KUEUE ?=
BENCH_FOREIGN ?= 0
BENCH_PROGRESS ?=
BENCH_ELASTIC ?=
bench: tools ## time N jobs x R replicas against a raw client-go loop; BENCH_FINISHED=N: after N finished jobs; BENCH_SCALE=N: memory up to N jobs, restart; BENCH_KUEUE=1: queued, without and with topology; BENCH_PROGRESS=1: every pod reporting progress; BENCH_ELASTIC=1: elastic jobs resized (with BENCH_KUEUE=1: in a queue, through workload slices)
	T9K_TOOLS_BIN=$$(hack/lib/tools.sh) go run ./test/bench -kind $(BENCH_KIND) -jobs $(BENCH_JOBS) -replicas $(BENCH_REPLICAS) \
		-qps $(BENCH_QPS) -burst $(BENCH_BURST) -rounds $(BENCH_ROUNDS) \
		-finished $(BENCH_FINISHED) -scale $(BENCH_SCALE) -scale-step $(BENCH_SCALE_STEP) -foreign $(BENCH_FOREIGN) \
		$(if $(filter-out 0,$(BENCH_KUEUE)),-kueue) $(if $(filter-out 0,$(BENCH_PROGRESS)),-progress) $(if $(filter-out 0,$(BENCH_ELASTIC)),-elastic)
