package main

import "testing"

// `rollplan --version` prints what `rollplan version` prints, whatever the
// version and commit the build stamped (a template's braces included).
func TestVersionFlag(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	for _, c := range []struct{ version, commit, want string }{
		{"dev", "unknown", "rollplan dev (commit unknown)\n"},
		{"v0.4.1", "3f2a9c1", "rollplan v0.4.1 (commit 3f2a9c1)\n"},
		{"v1 {{.Name}}", `"x"`, "rollplan v1 {{.Name}} (commit \"x\")\n"},
	} {
		version, commit = c.version, c.commit
		for _, args := range [][]string{{"version"}, {"--version"}} {
			out, line, code := execute(t, args...)
			if code != 0 || out != c.want {
				t.Errorf("version %q: rollplan %s: exit %d %s, printed %q; want %q", c.version, args[0], code, line, out, c.want)
			}
		}
	}
}
