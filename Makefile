# rollplan — make targets. `make test` is what CI runs.
GO      ?= go
OPA     := $(GO) tool -modfile=tools/go.mod opa
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build demo test test-go test-policies lint fuzz bench golden clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/rollplan ./cmd/rollplan

## demo: plan a bundled scenario and print the table
demo: build
	./bin/rollplan plan -f testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml --now 2026-03-01T12:00:00Z
	@echo
	./bin/rollplan plan -f testdata/scenarios/example-one-zone-at-a-time/snapshot.yaml --now 2026-03-01T12:00:00Z --policy policies/examples/one-zone-at-a-time
	@echo
	./bin/rollplan explain web-4 -f testdata/scenarios/example-leader-last/snapshot.yaml --now 2026-03-01T12:00:00Z --feature-gates MaxUnavailableStatefulSet=true --policy policies/examples/leader-last

## test: everything CI runs
test: lint test-policies test-go

test-go:
	$(GO) test -count=1 ./...

## test-policies: opa check/fmt on the Rego, then every shipped suite (Rego
## tests and RolloutPolicyTest YAML) through rollplan test, coverage >= 90%
test-policies:
	$(OPA) check --strict policies/
	@test -z "$$($(OPA) fmt --list policies/)" || { echo "opa fmt: these files need 'opa fmt -w':"; $(OPA) fmt --list policies/; exit 1; }
	$(GO) run ./cmd/rollplan test --coverage --fail-under 90 policies/

lint:
	@test -z "$$(gofmt -l cmd planner policies)" || { echo "gofmt needed:"; gofmt -l cmd planner policies; exit 1; }
	$(GO) vet ./...
	$(GO) tool -modfile=tools/go.mod staticcheck ./...

## fuzz: run each fuzz target for a while (FUZZTIME=30s)
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./planner/snapshot -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./planner/facts -run '^$$' -fuzz FuzzParseIntOrPercentString -fuzztime $(FUZZTIME)

## bench: the planning benchmarks recorded in BENCHMARKS.md
bench:
	$(GO) test ./planner/plan -run '^$$' -bench 'BenchmarkPlan' -benchmem -benchtime 3x -timeout 30m

## golden: rewrite the golden plans after checking a change
golden:
	$(GO) test ./cmd/rollplan -run TestGoldenScenarios -update

clean:
	rm -rf bin
