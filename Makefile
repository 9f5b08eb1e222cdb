# rollplan — make targets. `make test` is what CI runs.
GO      ?= go
OPA     := $(GO) tool -modfile=tools/go.mod opa
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build install uninstall demo dev-cluster test test-go test-policies test-cluster cluster-bin node-bin lint fuzz bench golden clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/rollplan ./cmd/rollplan

## install: bin/rollplan into $(DESTDIR)$(PREFIX)/bin, with kubectl-rollplan
## beside it (a relative link) so that `kubectl rollplan ...` finds it on
## PATH, and kubectl_complete-rollplan, which kubectl >= 1.26 runs to
## complete it; packagers set DESTDIR (a staging root) and PREFIX (default
## /usr/local)
PREFIX ?= /usr/local
BINDIR := $(DESTDIR)$(PREFIX)/bin
install: build
	install -d "$(BINDIR)"
	install -m 0755 bin/rollplan "$(BINDIR)/rollplan"
	ln -sf rollplan "$(BINDIR)/kubectl-rollplan"
	install -m 0755 deploy/kubectl_complete-rollplan "$(BINDIR)/kubectl_complete-rollplan"

uninstall:
	rm -f "$(BINDIR)/kubectl_complete-rollplan" "$(BINDIR)/kubectl-rollplan" "$(BINDIR)/rollplan"

## demo: plan two bundled scenarios and explain one pod's place in a
## third; the second plan is also written as an HTML page (bin/demo/plan.html)
DEMO_HTML := bin/demo/plan.html
demo: build
	./bin/rollplan plan -f testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml --now 2026-03-01T12:00:00Z
	@echo
	./bin/rollplan plan -f testdata/scenarios/example-one-zone-at-a-time/snapshot.yaml --now 2026-03-01T12:00:00Z --policy policies/examples/one-zone-at-a-time
	@mkdir -p $(dir $(DEMO_HTML))
	./bin/rollplan plan -f testdata/scenarios/example-one-zone-at-a-time/snapshot.yaml --now 2026-03-01T12:00:00Z --policy policies/examples/one-zone-at-a-time -o html > $(DEMO_HTML)
	@echo
	./bin/rollplan explain web-4 -f testdata/scenarios/example-leader-last/snapshot.yaml --now 2026-03-01T12:00:00Z --policy policies/examples/leader-last
	@echo
	@echo "The plan as a picture: open $(abspath $(DEMO_HTML))  (file://$(abspath $(DEMO_HTML)))"

## test: everything CI runs
test: lint test-policies test-go test-cluster

test-go:
	$(GO) test -count=1 ./...

## test-policies: opa check/fmt on the Rego, then every shipped suite (Rego
## tests and RolloutPolicyTest YAML) through rollplan test, coverage >= 90%
test-policies:
	$(OPA) check --strict policies/
	@test -z "$$($(OPA) fmt --list policies/)" || { echo "opa fmt: these files need 'opa fmt -w':"; $(OPA) fmt --list policies/; exit 1; }
	$(GO) run ./cmd/rollplan test --coverage --fail-under 90 policies/

lint:
	@test -z "$$(gofmt -l analysis api cmd controller planner policies test executor gate deploy history internal)" || { echo "gofmt needed:"; gofmt -l analysis api cmd controller planner policies test executor gate deploy history internal; exit 1; }
	$(GO) vet ./...
	$(GO) tool -modfile=tools/go.mod staticcheck ./...
	@# the layering of docs/architecture.md: no import across a forbidden edge
	$(GO) test -count=1 ./internal/layers

## fuzz: run each fuzz target for a while (FUZZTIME=30s)
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./planner/snapshot -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	$(GO) test ./planner/facts -run '^$$' -fuzz FuzzParseIntOrPercentString -fuzztime $(FUZZTIME)
	$(GO) test ./planner/change -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./planner/plan -run '^$$' -fuzz FuzzPlan -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./planner/plan -run '^$$' -fuzz FuzzAnalysisState -fuzztime $(FUZZTIME)
	$(GO) test ./planner/engine/rego -run '^$$' -fuzz FuzzPolicy -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./planner/engine/cel -run '^$$' -fuzz FuzzPolicy -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./gate -run '^$$' -fuzz FuzzServeHTTP -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./planner/policytest -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) -fuzzminimizetime 0

## bench: the planning benchmarks recorded in BENCHMARKS.md
bench:
	$(GO) test ./planner/plan -run '^$$' -bench 'BenchmarkPlan' -benchmem -benchtime 3x -timeout 30m

## golden: rewrite the golden files (plans, the HTML page, explain, markdown) after checking a change
golden:
	$(GO) test ./cmd/rollplan -run 'TestGoldenScenarios|TestGoldenHTML|TestExplainGolden|TestMarkdownGolden' -update

## cluster-bin: etcd, kube-apiserver, kube-controller-manager and kubectl of
## each tested Kubernetes version, built from the pinned sources in
## test/cluster/<version> into test/cluster/bin/<version> (about 10 minutes
## cold per version on 2 cores; make skips a version while its binaries are
## newer than its module files)
CLUSTER_DIR      := test/cluster
CLUSTER_BIN      := $(CLUSTER_DIR)/bin
CLUSTER_VERSIONS := v1.37.2 v1.36.3
# v1.37.2 -> v1.37, the folder of that minor's module and binaries
minor = $(word 1,$(subst ., ,$(1))).$(word 2,$(subst ., ,$(1)))
k8s_ldflags = -s -w \
	-X k8s.io/component-base/version.gitVersion=$(1) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(1))) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(1) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 \
	-X k8s.io/client-go/pkg/version.gitMinor=$(word 2,$(subst ., ,$(1))) \
	-X k8s.io/client-go/pkg/version.gitTreeState=clean
CLUSTER_STAMPS   := $(foreach v,$(CLUSTER_VERSIONS),$(CLUSTER_BIN)/$(call minor,$(v))/.built)

cluster-bin: $(CLUSTER_STAMPS)

# The real node's parts (test/node) only for the version it runs on: the
# newest. Each other version builds the control plane alone.
NODE_VERSION   := $(firstword $(CLUSTER_VERSIONS))
NODE_K8S_CMDS  := k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
comma          := ,
NODE_K8S_NOTE  := $(comma) kubelet$(comma) kube-scheduler$(comma) kube-proxy
define cluster_bin_rule
$(CLUSTER_BIN)/$(call minor,$(1))/.built: $(CLUSTER_DIR)/$(call minor,$(1))/go.mod $(CLUSTER_DIR)/$(call minor,$(1))/go.sum $(CLUSTER_DIR)/$(call minor,$(1))/etcd/main.go
	@mkdir -p $(CLUSTER_BIN)/$(call minor,$(1))
	@echo "building etcd, kube-apiserver, kube-controller-manager, kubectl$(if $(filter $(NODE_VERSION),$(1)),$(NODE_K8S_NOTE)) $(1) (cold: ~10 min)"
	cd $(CLUSTER_DIR)/$(call minor,$(1)) && $(GO) build -trimpath -ldflags "$(call k8s_ldflags,$(1))" -o $(abspath $(CLUSTER_BIN))/$(call minor,$(1))/ \
		./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl \
		$(if $(filter $(NODE_VERSION),$(1)),$(NODE_K8S_CMDS))
	@touch $$@
endef
$(foreach v,$(CLUSTER_VERSIONS),$(eval $(call cluster_bin_rule,$(v))))

## node-bin: the real node's runtime for test/node, into test/cluster/bin/node:
## containerd 2.x with its CRI plugin and the runc shim (test/node/containerd),
## the CNI plugins bridge, host-local, loopback, portmap (test/node/cni) and
## the test registry (test/node/registry), each from its own pinned module so
## their dependencies never meet rollplan's or each other's. runc and
## iptables come from the OS (Debian packages runc, iptables).
NODE_BIN   := $(CLUSTER_BIN)/node
NODE_STAMP := $(NODE_BIN)/.built
# Recursive (=): read only by node-bin, so make works where test/node is absent
# (the README demo test runs the Makefile in a folder without it).
CONTAINERD_VERSION = $(shell sed -n 's|^\tgithub.com/containerd/containerd/v2 \(v[^ ]*\).*|\1|p' test/node/containerd/go.mod 2>/dev/null)
node-bin: $(NODE_STAMP)
$(NODE_STAMP): $(wildcard test/node/containerd/go.* test/node/cni/go.* test/node/registry/go.* test/node/registry/*.go)
	@mkdir -p $(NODE_BIN)/cni
	@echo "building containerd $(CONTAINERD_VERSION), the runc shim, CNI plugins and the test registry"
	cd test/node/containerd && CGO_ENABLED=0 $(GO) build -trimpath -tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs" \
		-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" -o $(abspath $(NODE_BIN))/ \
		github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
	cd test/node/cni && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $(NODE_BIN))/cni/ tool
	cd test/node/registry && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $(NODE_BIN))/ .
	@touch $@

## test-cluster: the suites that need a real control plane (control plane,
## test kubelet, e2e on the newest version, fidelity against each version's
## kube-controller-manager, the real node: test/node, as root with runc and
## iptables); fails if any control-plane or node process outlives them
FIDELITY_REPORT := bin/fidelity-report.txt
CLUSTER_PROCS   := $(abspath $(CLUSTER_BIN))/(v[0-9.]+/(e[t]cd|kube-apiserve[r]|kube-controller-manage[r]|kube[l]et|kube-schedule[r]|kube-prox[y])|node/(container[d]|registr[y]))
test-cluster: $(CLUSTER_STAMPS) $(NODE_STAMP)
	@mkdir -p bin && rm -f $(FIDELITY_REPORT)
	ROLLPLAN_CLUSTER_BIN=$(abspath $(CLUSTER_BIN)) ROLLPLAN_FIDELITY_REPORT=$(abspath $(FIDELITY_REPORT)) \
		$(GO) test -count=1 -timeout 60m ./test/...
	@cat $(FIDELITY_REPORT)
	@# Only this checkout's binaries: other checkouts may run their own.
	@if pgrep -f '$(CLUSTER_PROCS)' >/dev/null; then \
		echo "test-cluster: control-plane processes left behind:"; \
		pgrep -af '$(CLUSTER_PROCS)'; \
		pkill -KILL -f '$(CLUSTER_PROCS)'; exit 1; fi

## dev-cluster: docs/dev-cluster.md: the newest control plane
## (built first if needed), the test kubelet with 6 nodes in 3 zones,
## bin/rollplan's gate and three demo workloads, as local processes; prints
## the kubeconfig and the commands to try, and runs until Ctrl-C, which stops
## every process it started. NODE=real runs one real node instead (as root,
## with runc, iptables, nft; node-bin first), its registry holding testapp and
## rollplan's image built from this checkout, and installs rollplan from its
## manifests: the controller and the gate run as pods. Not part of `make test`
## (it never ends); its test, test/devcluster, is (make test-cluster).
DEV_VERSION := $(call minor,$(firstword $(CLUSTER_VERSIONS)))
NODE        ?= simulated
dev-cluster: build $(CLUSTER_BIN)/$(DEV_VERSION)/.built $(if $(filter real,$(NODE)),$(NODE_STAMP))
	$(GO) build -o bin/devcluster ./test/devcluster
	ROLLPLAN_CLUSTER_BIN=$(CLUSTER_BIN) ./bin/devcluster --node $(NODE) --kubernetes-version $(DEV_VERSION) --rollplan ./bin/rollplan --dir bin/dev-cluster

clean:
	rm -rf bin $(CLUSTER_BIN)
