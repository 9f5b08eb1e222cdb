package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// TestWrite: the file reads back as the snapshot synth builds, in either
// format, and any other extension is refused before anything is written.
func TestWrite(t *testing.T) {
	want := len(synth.Snapshot(300).Pods)
	for _, tc := range []struct {
		file    string
		wantErr string
	}{
		{file: "s.json"},
		{file: "s.yaml"},
		{file: "s.yml", wantErr: "want a .json or .yaml file"},
		{file: "s", wantErr: "want a .json or .yaml file"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tc.file)
			err := write(300, out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("write(%s) = %v, want an error containing %q", tc.file, err, tc.wantErr)
				}
				if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
					t.Fatalf("write(%s) failed but left a file: %v", tc.file, statErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, _, err := snapshot.LoadFiles([]string{out})
			if err != nil {
				t.Fatalf("reading %s back: %v", tc.file, err)
			}
			if got := len(s.Pods); got != want {
				t.Fatalf("%s holds %d pods, synth.Snapshot(300) %d", tc.file, got, want)
			}
		})
	}
}
