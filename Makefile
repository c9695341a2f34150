# The README's commands. `make test` is what CI runs (through .ci/run).
.PHONY: test generate build install example bench stress

# Where `make install` puts the binaries: BINDIR when given (make install
# BINDIR=~/bin), else `go env GOBIN`, else `$(go env GOPATH)/bin`, the
# directory `go install` uses, which the Go installer puts on PATH.
BINDIR ?= $(or $(shell go env GOBIN),$(shell go env GOPATH)/bin)

test:
	scripts/test.sh

generate:
	scripts/generate.sh

build:
	go build -o bin/ ./cmd/...

# All five programs side by side: decreectl finds decree-supervisor and
# decree-driver-tree beside itself.
install:
	GOBIN="$(abspath $(BINDIR))" go install ./cmd/...
	@echo "installed decreectl, decree-controller, decree-worker, decree-driver-tree and decree-supervisor in $(abspath $(BINDIR))"

example: build
	scripts/example.sh

bench:
	bench/run.sh

# The fault tests, 20 times each under two CPU hogs (scripts/stress.sh).
stress:
	scripts/stress.sh
