// Package docs holds the checks of the project's own documentation.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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
				if link {
					continue // TestLinksResolve
				}
				p, _, _ = strings.Cut(p, "#")
				p = strings.TrimRight(p, ".,:;")
				if strings.ContainsAny(p, "<>*$%{}") || strings.HasPrefix(p, "test/cluster/bin") {
					continue // a pattern, a placeholder or a build output, not a file
				}
				if kindName.MatchString(p) {
					continue // deploy/api: a KIND/NAME argument
				}
				if !repoPath.MatchString(p) {
					continue
				}
				_, err := os.Stat(filepath.Join(root, p))
				checked++
				if err != nil {
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

// link is a Markdown link's target.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every link of the README and docs/ leads where a reader clicking it on
// GitHub lands: the file, relative to the page, and the heading its
// #fragment names (moving a section between pages breaks both).
func TestLinksResolve(t *testing.T) {
	root := "../.."
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md"), filepath.Join(root, "test", "README.md"))
	checked, anchors := 0, 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
				}
				checked++
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d links to %s, which is not there relative to the page", rel, i+1, target)
					continue
				}
				if frag == "" {
					continue
				}
				anchors++
				if !slices.Contains(headingSlugs(t, dest), frag) {
					t.Errorf("%s:%d links to %s: %s has no heading #%s", rel, i+1, target, filepath.Base(dest), frag)
				}
			}
		}
	}
	if checked < 30 || anchors < 5 {
		t.Errorf("checked %d links and %d anchors: the pattern no longer finds them", checked, anchors)
	}
}

// headingSlugs are the anchors GitHub gives a page's headings: lower case,
// punctuation but hyphens and underscores dropped, spaces as hyphens.
func headingSlugs(t *testing.T, page string) []string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	fenced := false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slugs = append(slugs, b.String())
	}
	return slugs
}
