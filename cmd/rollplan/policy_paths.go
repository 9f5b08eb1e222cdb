package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/rollplan/rollplan/planner/engine/engines"
)

// checkPolicyPaths refuses a --policy path that is not there, naming it as
// the flag took it ("--policy PATH: no such file or directory: pass a
// policy file or directory"), before an engine is picked or loads it. Every
// command taking --policy picks its engine through planFlags.engineKind,
// which calls it first.
func checkPolicyPaths(paths []string) error {
	for _, p := range paths {
		_, err := os.Stat(p)
		if err == nil {
			continue
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // "no such file or directory", not "stat PATH: ..."
		}
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--policy %s: %w: pass a policy file or directory", p, err)
		}
		return fmt.Errorf("--policy %s: %w", p, err)
	}
	return nil
}

// notPolicy says that the path holds no policy of the engine (Rego or CEL).
func notPolicy(pp engines.Path, engine string) string {
	if pp.Dir {
		other := "CEL policies (.yaml)"
		if engine == "CEL" {
			other = "Rego files (.rego)"
		}
		return fmt.Sprintf("%s holds %s and no %s policy", pp.Path, other, engine)
	}
	return fmt.Sprintf("%s is not a %s policy file", pp.Path, engine)
}
