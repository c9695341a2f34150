# The README's commands. `make test` is what CI runs (through .ci/run).
.PHONY: test generate build example bench stress

test:
	scripts/test.sh

generate:
	scripts/generate.sh

build:
	go build -o bin/ ./cmd/...

example: build
	scripts/example.sh

bench:
	bench/run.sh

# The fault tests, 20 times each under two CPU hogs (scripts/stress.sh).
stress:
	scripts/stress.sh
