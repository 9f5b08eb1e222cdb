// Package docs holds the checks of the project's own documentation.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A path the README or a docs page cites, in backticks or as a link target.
var (
	cited = regexp.MustCompile("`([^`\\s]+)`|\\]\\(([^)\\s]+)\\)")
	// Top folders of the repository, and shared/ (which is not in it: a
	// page that cites it points a reader at nothing).
	kindName = regexp.MustCompile(`^(deploy|sts|ds|statefulset|deployment|daemonset)/[a-z0-9-]+$`)
	repoPath = regexp.MustCompile(`^(\./)?(cmd|planner|policies|testdata|docs|deploy|test|gate|executor|controller|internal|history|tools|shared)/`)
)

// Every file the README and docs/ cite exists in the repository: a page
// must not send a reader to a file that is not there (issue 33: the README
// cited shared/reference/k8s-rollout-semantics.md, which only the
// developers' machines hold).
func TestCitedPathsExist(t *testing.T) {
	root := "../.."
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range cited.FindAllStringSubmatch(line, -1) {
				p := m[1] + m[2]
				link := m[2] != ""
				p, _, _ = strings.Cut(p, "#")
				p = strings.TrimRight(p, ".,:;")
				if strings.ContainsAny(p, "<>*$%{}") || strings.HasPrefix(p, "test/cluster/bin") {
					continue // a pattern, a placeholder or a build output, not a file
				}
				if kindName.MatchString(p) {
					continue // deploy/api: a KIND/NAME argument
				}
				candidates := []string{filepath.Join(root, p)}
				if link {
					candidates = append(candidates, filepath.Join(filepath.Dir(page), p))
				} else if !repoPath.MatchString(p) {
					continue
				}
				found := false
				for _, c := range candidates {
					if _, err := os.Stat(c); err == nil {
						found = true
					}
				}
				checked++
				if !found && (link && !strings.Contains(p, "://") || !link) {
					rel, _ := filepath.Rel(root, page)
					t.Errorf("%s:%d cites %s, which is not in the repository", rel, i+1, p)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d cited paths: the pattern no longer finds them", checked)
	}
}
