package policytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecode: any bytes decode to suites (none for documents of other
// kinds) or an error naming the file, never a panic. Seeds: the shipped
// suites and the unit tests' document.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(validSuite))
	paths, _ := filepath.Glob("../../policies/examples/*/*_test.yaml")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("apiVersion: rollplan.dev/v1alpha1\nkind: RolloutPolicyTest\nspec: {tests: [{expect: {decisions: {a: {pods: {b: {scop: 1}}}}}}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Decode("f_test.yaml", data); err != nil && !strings.HasPrefix(err.Error(), "f_test.yaml") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
