# The README's two commands are `make demo` and `make test`; everything else is for developers.
GO      ?= go
export PATH := $(PATH):/usr/local/go/bin
BINS    := gateway-worker pushsim
# LAB_BINS are the lab module's (lab/go.mod: the demo, its report and the bench, with the
# libraries only they use), built from lab/.
LAB_BINS := gateway-lab
# PKGS are the product module's packages; LAB_PKGS the lab module's, relative to lab/;
# DEPLOY_PKGS the deploy module's (deploy/go.mod, the deploy checks and the image builder, with
# dependencies of their own), relative to deploy/. With PKGS set to something else, LAB_PKGS and
# DEPLOY_PKGS are empty unless they are set too.
PKGS    := ./...
LAB_PKGS ?= $(if $(filter ./...,$(PKGS)),./...)
DEPLOY_PKGS ?= $(if $(filter ./...,$(PKGS)),./...)
FUZZTIME ?= 20s

# VERSION is what every build is stamped with (`gateway-worker version`, the webpush_build_info
# metric, the image's version label): the tag that describes HEAD (`git describe --tags
# --dirty`: v0.1.0 on the tagged commit, v0.1.0-3-gabc1234 past it, -dirty with uncommitted
# changes), else the VERSION file, the release this tree is of (a clone without tags, or a tree
# without git). The VERSION file, CHANGELOG.md's newest release, the production overlay's
# image tag and the Helm chart's appVersion name the same release; tests check that they agree.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --dirty 2>/dev/null || cat VERSION)
endif
BUILDINFO := github.com/webpush-gateway/webpush-gateway/internal/product/buildinfo
LDFLAGS   := -X $(BUILDINFO).stamp=$(VERSION)

.PHONY: demo test deps build image vet fmt-check unit bench fuzz clean

## demo: a minute of steady traffic across the simulated push services, Autopush stalled halfway;
## live per-provider table, then demo-report.html and demo-report.png
demo: deps build
	bin/gateway-lab demo

## test: everything CI runs: what the tests need, formatting, vet, the race-enabled tests (of
## the product module, the lab module and the deploy module)
test: deps fmt-check vet unit

## deps: redis-server and promtool (bin/promtool) from Debian's packages when they are missing;
## for the examples' tests, redis-py (python3-redis), node and examples/node's packages
deps:
	@scripts/install-deps.sh
	@scripts/install-example-deps.sh

## build: the worker (bin/gateway-worker, the product) and the simulator (bin/pushsim) from the
## product module, the lab's demo and bench (bin/gateway-lab) from the lab module
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(BINS))
	cd lab && $(GO) build -o ../bin/ $(addprefix ./cmd/,$(LAB_BINS))

## image: the worker's container image as an OCI tarball, built without a daemon or registry
## (load it with docker load -i, podman load -i or kind load image-archive; deploy/Dockerfile is
## the same image for builders with a daemon). The builder is in the deploy module; it compiles
## ./cmd/gateway-worker of the repository root.
image:
	cd deploy && $(GO) run ./image/cmd/gateway-worker-image -repo .. -out ../bin/gateway-worker-image.tar $(IMAGE_FLAGS)

# The image holds the worker built by image-binary, stamped with VERSION; IMAGE_FLAGS are more
# flags for the image builder (the later of two same flags wins).
IMAGE_ARCH   ?= $(shell $(GO) env GOARCH)
IMAGE_BINARY ?= $(CURDIR)/bin/linux-$(IMAGE_ARCH)/gateway-worker
IMAGE_FLAGS  ?= -binary $(IMAGE_BINARY) -version $(VERSION)
image: image-binary

.PHONY: image-binary release release-verify version

## image-binary: the worker as the image and the release carry it: static (CGO_ENABLED=0),
## linux/IMAGE_ARCH, without build paths or symbol table, stamped with VERSION
image-binary:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(IMAGE_BINARY) ./cmd/gateway-worker

## version: the version builds are stamped with
version:
	@echo $(VERSION)

## release: dist/ ready to publish (needs only Go and the module proxy; no daemon, no registry):
## the worker for linux/amd64 and linux/arm64 and an SPDX SBOM of each; the image for both
## platforms as one OCI image index tagged VERSION (ghcr.io/webpush-gateway/gateway-worker, the
## name the production overlay and the chart pull), signed with cosign and each image's SBOM
## attached as a signed attestation, in an OCI layout (dist/gateway-worker-VERSION-oci/); the
## Helm chart packaged; SHA256SUMS of every file, its signature SHA256SUMS.sig, and cosign.pub,
## the key that verifies them. The key is COSIGN_KEY's (a cosign.key path, env://VARIABLE or a
## KMS URI; COSIGN_PASSWORD unlocks it), else a key pair made for the run whose private half is
## gone when it ends. deploy/release does the signing and checks the result before it ends.
RELEASE_IMAGE ?= ghcr.io/webpush-gateway/gateway-worker
RELEASE_ARCHS := amd64 arm64
RELEASE_BINS   = $(foreach a,$(RELEASE_ARCHS),$(CURDIR)/dist/gateway-worker-$(VERSION)-linux-$(a))
release:
	rm -rf dist && mkdir -p dist
	for arch in $(RELEASE_ARCHS); do \
		$(MAKE) --no-print-directory image-binary IMAGE_ARCH=$$arch IMAGE_BINARY=$(CURDIR)/dist/gateway-worker-$(VERSION)-linux-$$arch VERSION=$(VERSION) || exit 1; \
		$(GO) run ./internal/product/sbom -version $(VERSION) -out dist/gateway-worker-$(VERSION)-linux-$$arch.spdx.json dist/gateway-worker-$(VERSION)-linux-$$arch || exit 1; \
	done
	key="$${COSIGN_KEY:-}"; case "$$key" in ""|/*|*://*) ;; *) key="$(CURDIR)/$$key" ;; esac; \
	cd deploy && COSIGN_KEY="$$key" $(GO) run ./release/cmd/gateway-worker-release make -dir $(CURDIR)/dist \
		-version $(VERSION) -repository $(RELEASE_IMAGE) -chart helm/webpush-gateway $(RELEASE_BINS)
	@echo "release $(VERSION) in dist/:"; ls -l dist

## release-verify: check dist/ as anyone who downloads it can (RELEASE_KEY: the public key, by
## default dist/cosign.pub): the signature of SHA256SUMS, every file's digest, the signatures
## of the image index and each image, and each image's attested SBOM
RELEASE_KEY ?= $(CURDIR)/dist/cosign.pub
release-verify:
	cd deploy && $(GO) run ./release/cmd/gateway-worker-release verify -key $(RELEASE_KEY) $(CURDIR)/dist

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(if $(strip $(PKGS)),$(GO) vet $(PKGS))
	$(if $(strip $(LAB_PKGS)),cd lab && $(GO) vet $(LAB_PKGS))
	$(if $(strip $(DEPLOY_PKGS)),cd deploy && $(GO) vet $(DEPLOY_PKGS))

# unit: most of the tests' time is spent waiting (on redis-server, child processes, timeouts and
# rate windows), so more packages run at once than there are cores (-p) and, within a package,
# more of the tests that call t.Parallel (-parallel). The three longest packages are named first,
# so they start first and side by side: test/isolation and dispatch measure throughput and rates
# on the wall clock, and they share the cores only with each other and stream, which all mostly
# wait; -p 3 keeps a fourth package, which would compute, from running beside them. The rest
# follow, the longest first. go test runs each package once. The lab module's tests run after
# the product's, in a go test of their own (a module is one go test), the bench's (which builds
# both binaries and runs every contender) and the report's (which renders the PNGs) first; then
# the deploy module's, the image builder's (which compiles the worker) first. (With PKGS set to
# something else, just those run.)
UNIT_P        ?= 3
UNIT_PARALLEL ?= 8
UNIT_FIRST    := $(if $(filter ./...,$(PKGS)),./test/isolation/ ./dispatch/ ./stream/ \
                 ./test/cluster/ ./test/crash/ ./test/bounds/)
LAB_FIRST     := $(if $(filter ./...,$(LAB_PKGS)),./bench/ ./demoreport/)
DEPLOY_FIRST  := $(if $(filter ./...,$(DEPLOY_PKGS)),./image/)
unit:
	$(if $(strip $(PKGS)),$(GO) test -race -count=1 -p $(UNIT_P) -parallel $(UNIT_PARALLEL) $(UNIT_FIRST) $(PKGS))
	$(if $(strip $(LAB_PKGS)),cd lab && $(GO) test -race -count=1 -p $(UNIT_P) -parallel $(UNIT_PARALLEL) $(LAB_FIRST) $(LAB_PKGS))
	$(if $(strip $(DEPLOY_PKGS)),cd deploy && $(GO) test -race -count=1 -p $(UNIT_P) -parallel $(UNIT_PARALLEL) $(DEPLOY_FIRST) $(DEPLOY_PKGS))

## bench: the side-by-side run (gateway, webpush-go consumer, Node web-push, encryption floor, send floor)
## and the micro-benchmarks recorded in BENCHMARKS.md
bench: deps build
	bin/gateway-lab bench --profile
	$(GO) test -run '^$$' -bench . -benchmem ./ece/ ./vapid/ ./adapter/ ./taxonomy/ ./providers/
	$(GO) test -run '^$$' -bench BenchmarkPipeline -benchtime 3x ./test/pipeline/

## fuzz: a short run of every fuzz target (FUZZTIME each); crashers land in testdata/fuzz
fuzz:
	@for spec in ece:FuzzDecrypt ece:FuzzParseKeys providers:FuzzParse providers:FuzzResolve taxonomy:FuzzClassify job:FuzzDecodeJob job:FuzzDecodeSubscription job:FuzzSplitObject job:FuzzJSONString; do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; \
		echo "== $$pkg $$fn"; $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$pkg/ || exit 1; \
	done

clean:
	rm -rf bin dist demo-report.html demo-report.png bench-report.json bench-report.md bench-gateway*.pprof
