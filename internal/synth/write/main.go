// Command write saves synth.Snapshot(n) as a snapshot file, as `rollplan
// snapshot` would write it (capture.Marshal), so that BENCHMARKS.md can time
// `rollplan plan -f` on the same synthetic cluster the benchmarks plan:
//
//	go run ./internal/synth/write -pods 150000 -o /tmp/synth-150k.yaml
//
// The format follows the file's extension (.json or .yaml).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

func main() {
	pods := flag.Int("pods", 20000, "about how many pods the snapshot holds")
	out := flag.String("o", "", "file to write; .json or .yaml")
	flag.Parse()
	if err := write(*pods, *out); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
}

func write(pods int, out string) error {
	format := strings.TrimPrefix(filepath.Ext(out), ".")
	if format != capture.FormatJSON && format != capture.FormatYAML {
		return fmt.Errorf("-o %q: want a .json or .yaml file", out)
	}
	data, err := capture.Marshal(synth.Snapshot(pods), format)
	if err != nil {
		return fmt.Errorf("marshal %d pods: %w", pods, err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
