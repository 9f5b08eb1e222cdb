package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"mvdan.cc/sh/v3/syntax"
)

// docCommand is one rollplan command line a page shows.
type docCommand struct {
	where string // page:line
	args  []string
	// partial: a code span of prose naming a command and maybe a flag
	// (`rollplan plan --change`), or a line completed with <TAB>; its
	// arguments and flag values are the reader's.
	partial bool
}

// rollplanPrefixes start a command line that runs rollplan.
var rollplanPrefixes = []string{"rollplan ", "bin/rollplan ", "./bin/rollplan ", "kubectl rollplan "}

// inlineCode is a code span of prose.
var inlineCode = regexp.MustCompile("`([^`]+)`")

// TestDocsCommands parses every rollplan command the README and docs/
// show (shell blocks, commands in output blocks, code spans in prose)
// with the CLI's own command tree: the subcommand exists, every flag is
// one it has and takes the value given, and the arguments are ones it
// accepts. A renamed flag or command fails here rather than in a
// reader's terminal; the sessions themselves run in test/devcluster.
func TestDocsCommands(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md")
	var commands []docCommand
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		found, err := docCommands(page, string(text))
		if err != nil {
			t.Error(err)
		}
		commands = append(commands, found...)
	}
	// About 120 on the pages as written: a count far below means the
	// scanner no longer finds them.
	if len(commands) < 80 {
		t.Errorf("found %d rollplan commands in the docs, want at least 80", len(commands))
	}
	for _, c := range commands {
		if err := checkCommand(c.args, c.partial); err != nil {
			t.Errorf("%s: %s: %v", c.where, strings.Join(c.args, " "), err)
		}
	}
}

// checkCommand resolves args (rollplan's, without the program name) in the
// command tree and parses its flags and arguments as cobra would.
func checkCommand(args []string, partial bool) error {
	if len(args) > 0 && args[0] == cobra.ShellCompRequestCmd {
		return nil // what kubectl's completion runs; cobra adds it at Execute
	}
	root := newRootCommand()
	root.InitDefaultCompletionCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root {
		return fmt.Errorf("names no subcommand")
	}
	cmd.InitDefaultHelpFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		if partial && strings.Contains(err.Error(), "flag needs an argument") {
			return nil
		}
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	if help, _ := cmd.Flags().GetBool("help"); help || partial {
		return nil
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	return nil
}

// docCommands finds the rollplan commands of one page: every call of a
// ```sh or ```bash block, the lines of other blocks that start with a
// rollplan command (the demo's output shows the commands it runs), and
// code spans of prose that start with one.
func docCommands(page, text string) ([]docCommand, error) {
	var out []docCommand
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(trimmed, "```") {
			for _, m := range inlineCode.FindAllStringSubmatch(lines[i], -1) {
				if hasRollplanPrefix(m[1]) {
					found, err := shellCommands(fmt.Sprintf("%s:%d", page, i+1), m[1])
					if err != nil {
						return out, err
					}
					for k := range found {
						found[k].partial = true
					}
					out = append(out, found...)
				}
			}
			continue
		}
		lang := strings.TrimPrefix(trimmed, "```")
		start := i + 1
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		block := lines[start:end]
		i = end
		if lang == "sh" || lang == "bash" {
			found, err := shellCommands(fmt.Sprintf("%s:%d", page, start+1), strings.Join(block, "\n"))
			if err != nil {
				return out, err
			}
			out = append(out, found...)
			continue
		}
		for j := 0; j < len(block); j++ {
			line := strings.TrimSpace(block[j])
			if !hasRollplanPrefix(line) {
				continue
			}
			at := j
			for strings.HasSuffix(line, "\\") && j+1 < len(block) {
				j++
				line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(block[j])
			}
			found, err := shellCommands(fmt.Sprintf("%s:%d", page, start+at+1), line)
			if err != nil {
				return out, err
			}
			out = append(out, found...)
		}
	}
	return out, nil
}

func hasRollplanPrefix(s string) bool {
	for _, p := range rollplanPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// placeholder stands for a word the shell would expand ($PR, $(git ...)):
// its value is not the docs' to check.
const placeholder = "PLACEHOLDER"

// tabPlaceholder stands for <TAB> in a completion example.
const tabPlaceholder = "TAB-PRESSED"

// shellCommands parses src as a shell script and returns the arguments of
// each call of rollplan in it (pipelines, lists and substitutions too).
func shellCommands(where, src string) ([]docCommand, error) {
	src = strings.ReplaceAll(src, "<TAB>", tabPlaceholder)
	file, err := syntax.NewParser().Parse(strings.NewReader(src), where)
	if err != nil {
		return nil, fmt.Errorf("%s: not a shell command the docs can show: %w", where, err)
	}
	var out []docCommand
	syntax.Walk(file, func(node syntax.Node) bool {
		call, ok := node.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]string, len(call.Args))
		for i, w := range call.Args {
			words[i] = wordValue(w)
		}
		var args []string
		switch {
		case words[0] == "rollplan" || strings.HasSuffix(words[0], "/rollplan"):
			args = words[1:]
		case words[0] == "kubectl" && len(words) > 1 && words[1] == "rollplan":
			args = words[2:]
		default:
			return true
		}
		partial := false
		if n := len(args); n > 0 && args[n-1] == tabPlaceholder {
			args, partial = args[:n-1], true
		}
		line := strings.SplitN(where, ":", 2)[0]
		out = append(out, docCommand{where: fmt.Sprintf("%s:%d", line, lineOf(where)+int(call.Pos().Line())-1), args: args, partial: partial})
		return true
	})
	return out, nil
}

// lineOf is the line number of a page:line position.
func lineOf(where string) int {
	var n int
	if _, after, ok := strings.Cut(where, ":"); ok {
		fmt.Sscan(after, &n)
	}
	return n
}

// wordValue is a word's value after quote removal; a part the shell
// would expand becomes placeholder.
func wordValue(w *syntax.Word) string {
	var b strings.Builder
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				b.WriteString(p.Value)
			case *syntax.SglQuoted:
				b.WriteString(p.Value)
			case *syntax.DblQuoted:
				parts(p.Parts)
			default:
				b.WriteString(placeholder)
			}
		}
	}
	parts(w.Parts)
	return b.String()
}

// The scanner and the check find what TestDocsCommands relies on them to
// find: each case is a page and whether its one command passes.
func TestDocsCommandsCatch(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		commands   int
		ok         bool
	}{
		{"a valid shell line", "```sh\nbin/rollplan plan -f snap.yaml -o json  # for scripts\n```\n", 1, true},
		{"a renamed flag", "```sh\nbin/rollplan plan -f snap.yaml --output-format json\n```\n", 1, false},
		{"an unknown command", "```bash\nrollplan rollout sts/web\n```\n", 1, false},
		{"a missing argument", "```sh\nrollplan apply -n prod\n```\n", 1, false},
		{"in a pipeline, after kubectl", "```sh\nrollplan snapshot -n prod | kubectl rollplan plan -f - --bogus\n```\n", 2, false},
		{"a continued line of an output block", "```\n./bin/rollplan plan -f s.yaml \\\n  --policy p\nPlanned for ...\n```\n", 1, true},
		{"prose naming a command and flag", "Use `rollplan plan --change` for that.\n", 1, true},
		{"prose naming a flag that is gone", "Use `rollplan plan --changes` for that.\n", 1, false},
		{"a completion example", "```sh\nkubectl rollplan status -n demo <TAB>\n```\n", 1, true},
		{"not rollplan", "```sh\nkubectl get pods -n demo\n```\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := docCommands("page.md", tc.page)
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != tc.commands {
				t.Fatalf("found %d commands, want %d: %v", len(found), tc.commands, found)
			}
			ok := true
			for _, c := range found {
				if checkCommand(c.args, c.partial) != nil {
					ok = false
				}
			}
			if ok != tc.ok {
				t.Errorf("check passed = %v, want %v", ok, tc.ok)
			}
		})
	}
}
