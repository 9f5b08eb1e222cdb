package parity

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/kubeversion"
)

var (
	flagFile    = flag.String("parity.file", "", "TestReplayFile: a snapshot (multi-document YAML, e.g. a printed reproduction) to plan with every engine and check")
	flagNow     = flag.String("parity.now", Now.Format(time.RFC3339), "TestReplayFile: the snapshot time (--now)")
	flagVersion = flag.String("parity.version", kubeversion.Newest.String(), "TestReplayFile: the Kubernetes version planned for")
	flagGates   = flag.String("parity.gates", "", "TestReplayFile: feature gates, e.g. MaxUnavailableStatefulSet=true")
)

// TestReplayFile plans a snapshot file with every engine and reports parity
// and every violation, known issues included:
//
//	go test ./internal/parity -run TestReplayFile -v -parity.file repro.yaml [-parity.gates MaxUnavailableStatefulSet=true]
func TestReplayFile(t *testing.T) {
	if *flagFile == "" {
		t.Skip("no -parity.file")
	}
	data, err := os.ReadFile(*flagFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse(time.RFC3339, *flagNow)
	if err != nil {
		t.Fatalf("-parity.now: %v", err)
	}
	gates := map[string]bool{}
	for _, kv := range strings.Split(*flagGates, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			gates[k] = v == "true"
		}
	}
	version, err := kubeversion.Parse(*flagVersion)
	if err != nil {
		t.Fatalf("-parity.version: %v", err)
	}
	o := evaluate(engines(t), &Case{Snap: s, Now: now, Version: version, Gates: gates})
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Logf("plan (%s):\n%s", engineNames(engines(t)), o.renders[0])
	for id, ex := range o.known {
		t.Logf("known planner issue %s: %s", id, ex)
	}
	if o.parity != "" {
		t.Errorf("plans differ (%s):\n%s", o.parity, o.diff)
	}
	for _, v := range o.violations {
		t.Error(v)
	}
}
