package node

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// The image rollplan ships is defined twice, by the Dockerfile and by
// .ko.yaml. The builder here reads both, with parsers of only what they say
// today, and refuses anything else with the file and line: an edit to
// either cannot silently leave the image tested here behind.

// DistrolessStatic is the base both definitions name; baseImage is its
// local equivalent.
const DistrolessStatic = "gcr.io/distroless/static:nonroot"

// imageDef is rollplan's image as the repository defines it: the binary as
// .ko.yaml builds it, laid out as the Dockerfile's final stage lays it.
type imageDef struct {
	// From .ko.yaml's one build.
	Main    string
	Env     []string // KEY=VALUE, for go build
	Flags   []string // go build flags besides -ldflags and -o
	Ldflags []xflag  // -X name=template

	// From the Dockerfile's final stage.
	Binary     string // the binary's path in the image
	User       string // numeric UID:GID or UID
	Entrypoint []string
}

// xflag is one -X name=value of the linker.
type xflag struct{ Name, Value string }

// ldflags renders the -X flags' values with version and commit, as ko
// fills {{.Git.Tag}} and {{.Git.ShortCommit}} from git.
func (d imageDef) ldflags(version, commit string) (string, error) {
	var parts []string
	for _, x := range d.Ldflags {
		parts = append(parts, "-X", x.Name+"="+x.Value)
	}
	return renderKo(strings.Join(parts, " "), version, commit)
}

// loadImageDef reads .ko.yaml and the Dockerfile at the module root.
func loadImageDef(root string) (imageDef, error) {
	ko, err := readKo(filepath.Join(root, ".ko.yaml"))
	if err != nil {
		return imageDef{}, err
	}
	df, err := readDockerfile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return imageDef{}, err
	}
	final, err := df.final()
	if err != nil {
		return imageDef{}, err
	}
	if ko.Base.Value != DistrolessStatic {
		return imageDef{}, fmt.Errorf("%s:%d: defaultBaseImage %s: the image builder (test/node) builds only %s's equivalent", ko.path, ko.Base.Line, ko.Base.Value, DistrolessStatic)
	}
	b := ko.Build
	return imageDef{
		Main: b.Main.Value, Env: values(b.Env), Flags: values(b.Flags), Ldflags: b.ldflags,
		Binary: final.Binary, User: final.User, Entrypoint: final.Entrypoint,
	}, nil
}

// ---- .ko.yaml ----

// lined is a YAML scalar and its line.
type lined struct {
	Value string
	Line  int
}

func (l *lined) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a string is required", n.Line)
	}
	l.Value, l.Line = n.Value, n.Line
	return nil
}

func values(ls []lined) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Value)
	}
	return out
}

// koFile is what the builder understands of .ko.yaml: any other key is an
// error (the decoder knows only these fields).
type koFile struct {
	Base   lined     `yaml:"defaultBaseImage"`
	Builds []koBuild `yaml:"builds"`

	path  string
	Build koBuild `yaml:"-"`
}

type koBuild struct {
	ID      string  `yaml:"id"`
	Main    lined   `yaml:"main"`
	Env     []lined `yaml:"env"`
	Flags   []lined `yaml:"flags"`
	Ldflags []lined `yaml:"ldflags"`

	ldflags []xflag
}

// koFlags are the go build flags the builder passes on from .ko.yaml.
var koFlags = map[string]bool{"-trimpath": true}

var envVar = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

func readKo(path string) (koFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return koFile{}, fmt.Errorf("rollplan's image: %w", err)
	}
	return parseKo(path, raw)
}

func parseKo(path string, raw []byte) (koFile, error) {
	var ko koFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&ko); err != nil {
		return koFile{}, yamlError(path, err)
	}
	ko.path = path
	if len(ko.Builds) != 1 {
		return koFile{}, fmt.Errorf("%s: %d builds: the image builder (test/node) builds exactly one", path, len(ko.Builds))
	}
	b := ko.Builds[0]
	if b.Main.Value == "" {
		return koFile{}, fmt.Errorf("%s: builds[0]: main is required", path)
	}
	for _, e := range b.Env {
		if !envVar.MatchString(e.Value) {
			return koFile{}, fmt.Errorf("%s:%d: env %q: KEY=VALUE is required", path, e.Line, e.Value)
		}
	}
	for _, f := range b.Flags {
		if !koFlags[f.Value] {
			return koFile{}, fmt.Errorf("%s:%d: flag %q: the image builder (test/node/imagedef.go) passes on only -trimpath", path, f.Line, f.Value)
		}
	}
	for _, l := range b.Ldflags {
		xs, err := parseLdflags(l.Value)
		if err != nil {
			return koFile{}, fmt.Errorf("%s:%d: ldflags: %w", path, l.Line, err)
		}
		// Rendered once here so that a template the builder cannot fill
		// fails on its own line.
		if _, err := renderKo(l.Value, "v0", "0"); err != nil {
			return koFile{}, fmt.Errorf("%s:%d: ldflags: %w", path, l.Line, err)
		}
		b.ldflags = append(b.ldflags, xs...)
	}
	ko.Build = b
	return ko, nil
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line ([0-9]+): (.*)$`)

// yamlError restates yaml's "line N: ..." errors as PATH:N: ..., one per
// line, with what the builder understands.
func yamlError(path string, err error) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var out []string
	for _, m := range msgs {
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			out = append(out, fmt.Sprintf("%s:%s: %s", path, g[1], g[2]))
		} else {
			out = append(out, fmt.Sprintf("%s: %s", path, m))
		}
	}
	return fmt.Errorf("%s (the image builder in test/node understands only defaultBaseImage and builds' id, main, env, flags, ldflags)", strings.Join(out, "; "))
}

// koData is what the builder fills ko's templates with: ko takes the Git
// values from the checkout, the caller gives them here.
type koData struct {
	Git struct{ Tag, ShortCommit string }
}

func renderKo(text, version, commit string) (string, error) {
	t, err := template.New("ldflags").Option("missingkey=error").Parse(text)
	if err != nil {
		return "", err
	}
	var d koData
	d.Git.Tag, d.Git.ShortCommit = version, commit
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("%w (the image builder fills only {{.Git.Tag}} and {{.Git.ShortCommit}})", err)
	}
	return b.String(), nil
}

// parseLdflags reads "-X name=value ..." and nothing else.
func parseLdflags(s string) ([]xflag, error) {
	words := strings.Fields(s)
	var out []xflag
	for i := 0; i < len(words); i++ {
		if words[i] != "-X" || i+1 == len(words) {
			return nil, fmt.Errorf("%q: the image builder understands only -X importpath.name=value", s)
		}
		name, value, ok := strings.Cut(words[i+1], "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("-X %q: importpath.name=value is required", words[i+1])
		}
		out = append(out, xflag{name, value})
		i++
	}
	return out, nil
}

// ---- Dockerfile ----

type dockerfile struct {
	path   string
	stages []stage
}

type stage struct {
	From, Name string
	Line       int
	Instrs     []instruction
}

type instruction struct {
	Cmd  string // upper case: RUN, COPY
	Args string // continuation lines joined
	Line int    // where it begins
}

// dockerInstructions are those the parser reads; what each may say is
// checked where it is used.
var dockerInstructions = map[string]bool{"FROM": true, "WORKDIR": true, "COPY": true, "ARG": true, "RUN": true, "USER": true, "ENTRYPOINT": true}

func readDockerfile(path string) (dockerfile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return dockerfile{}, fmt.Errorf("rollplan's image: %w", err)
	}
	return parseDockerfile(path, string(raw))
}

func parseDockerfile(path, text string) (dockerfile, error) {
	df := dockerfile{path: path}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		start := i + 1
		// A trailing backslash continues the instruction; comment lines
		// within it are dropped, as Docker drops them.
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue
			}
			line = strings.TrimSuffix(line, `\`) + " " + next
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start}
		if !dockerInstructions[in.Cmd] {
			return dockerfile{}, fmt.Errorf("%s:%d: %s: not understood by the image builder (test/node/imagedef.go)", path, start, cmd)
		}
		if in.Cmd == "FROM" {
			words := strings.Fields(in.Args)
			st := stage{Line: start}
			switch {
			case len(words) == 1:
				st.From = words[0]
			case len(words) == 3 && strings.EqualFold(words[1], "AS"):
				st.From, st.Name = words[0], words[2]
			default:
				return dockerfile{}, fmt.Errorf("%s:%d: FROM %s: IMAGE [AS NAME] is required", path, start, in.Args)
			}
			df.stages = append(df.stages, st)
			continue
		}
		if len(df.stages) == 0 {
			return dockerfile{}, fmt.Errorf("%s:%d: %s before any FROM", path, start, in.Cmd)
		}
		s := &df.stages[len(df.stages)-1]
		s.Instrs = append(s.Instrs, in)
	}
	if len(df.stages) == 0 {
		return dockerfile{}, fmt.Errorf("%s: no FROM", path)
	}
	return df, nil
}

// finalStage is what the image is made of: the base, the binary copied from
// a build stage, and the config.
type finalStage struct {
	Binary     string
	User       string
	Entrypoint []string
	Build      goBuild // the go build of the stage the binary comes from
	BuildStage stage
}

var numericUser = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)

// final reads the last stage: FROM the distroless base, one COPY --from a
// build stage of the binary it builds, USER, ENTRYPOINT in exec form.
func (df dockerfile) final() (finalStage, error) {
	st := df.stages[len(df.stages)-1]
	var f finalStage
	at := func(line int, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", df.path, line, fmt.Sprintf(format, a...))
	}
	if st.From != DistrolessStatic {
		return f, at(st.Line, "FROM %s: the image builder (test/node) builds only %s's equivalent", st.From, DistrolessStatic)
	}
	var copied bool
	for _, in := range st.Instrs {
		switch in.Cmd {
		case "COPY":
			words := strings.Fields(in.Args)
			if len(words) != 3 || !strings.HasPrefix(words[0], "--from=") {
				return f, at(in.Line, "COPY %s: the image builder understands only COPY --from=STAGE SRC DST", in.Args)
			}
			if copied {
				return f, at(in.Line, "a second COPY: the image builder copies only the binary")
			}
			from := strings.TrimPrefix(words[0], "--from=")
			var build *stage
			for i := range df.stages[:len(df.stages)-1] {
				if df.stages[i].Name == from {
					build = &df.stages[i]
				}
			}
			if build == nil {
				return f, at(in.Line, "COPY --from=%s: no stage of that name before", from)
			}
			gb, err := df.goBuild(*build)
			if err != nil {
				return f, err
			}
			if words[1] != gb.Out {
				return f, at(in.Line, "COPY %s: the stage %s builds %s (line %d)", words[1], from, gb.Out, gb.Line)
			}
			f.Binary, f.Build, f.BuildStage, copied = words[2], gb, *build, true
		case "USER":
			if !numericUser.MatchString(in.Args) {
				return f, at(in.Line, "USER %s: a numeric UID[:GID] is required (runAsNonRoot can check only a number)", in.Args)
			}
			f.User = in.Args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.Args), &f.Entrypoint); err != nil || len(f.Entrypoint) == 0 {
				return f, at(in.Line, "ENTRYPOINT %s: the exec form [\"...\"] is required", in.Args)
			}
		default:
			return f, at(in.Line, "%s in the final stage: not understood by the image builder (test/node/imagedef.go)", in.Cmd)
		}
	}
	switch {
	case !copied:
		return f, at(st.Line, "the final stage copies no binary")
	case f.User == "":
		return f, at(st.Line, "the final stage sets no USER: the image would run as its base's")
	case len(f.Entrypoint) == 0:
		return f, at(st.Line, "the final stage sets no ENTRYPOINT")
	}
	return f, nil
}

// goBuild is a build stage's `go build`, its ARGs' defaults substituted.
type goBuild struct {
	Env     map[string]string // assignments before go build
	Flags   []string          // besides -ldflags and -o
	Ldflags []xflag
	Out     string
	Main    string
	Line    int
}

// goBuild finds the one RUN of st that runs go build and reads it: only
// KEY=VALUE assignments, go build, -trimpath, -ldflags, -o and one package.
// ARGs are substituted with the values in args (their defaults if absent).
func (df dockerfile) goBuild(st stage) (goBuild, error) {
	return df.goBuildWith(st, nil)
}

func (df dockerfile) goBuildWith(st stage, args map[string]string) (goBuild, error) {
	vars := map[string]string{}
	var gb goBuild
	var found bool
	for _, in := range st.Instrs {
		at := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", df.path, in.Line, fmt.Sprintf(format, a...))
		}
		switch in.Cmd {
		case "ARG":
			name, def, _ := strings.Cut(in.Args, "=")
			vars[name] = def
			if v, ok := args[name]; ok {
				vars[name] = v
			}
		case "RUN":
			words, err := shellWords(in.Args, vars)
			if err != nil {
				return gb, at("RUN: %v", err)
			}
			i := 0
			env := map[string]string{}
			for ; i < len(words) && envVar.MatchString(words[i]); i++ {
				k, v, _ := strings.Cut(words[i], "=")
				env[k] = v
			}
			if len(words) < i+2 || words[i] != "go" || words[i+1] != "build" {
				continue
			}
			if found {
				return gb, at("a second go build in stage %s", st.Name)
			}
			found = true
			gb = goBuild{Env: env, Line: in.Line}
			rest := words[i+2:]
			for j := 0; j < len(rest); j++ {
				w := rest[j]
				name, value, hasValue := strings.Cut(w, "=")
				switch {
				case w == "-trimpath":
					gb.Flags = append(gb.Flags, w)
				case name == "-ldflags" || name == "-o":
					if !hasValue {
						if j+1 == len(rest) {
							return gb, at("go build %s: a value is required", name)
						}
						j++
						value = rest[j]
					}
					if name == "-o" {
						gb.Out = value
						continue
					}
					xs, err := parseLdflags(value)
					if err != nil {
						return gb, at("go build -ldflags: %v", err)
					}
					gb.Ldflags = xs
				case strings.HasPrefix(w, "-"):
					return gb, at("go build %s: the image builder understands only -trimpath, -ldflags and -o", w)
				case gb.Main != "":
					return gb, at("go build %s: a second package", w)
				default:
					gb.Main = w
				}
			}
			if gb.Out == "" || gb.Main == "" {
				return gb, at("go build: -o and a package are required")
			}
		}
	}
	if !found {
		return gb, fmt.Errorf("%s:%d: stage %s runs no go build", df.path, st.Line, st.Name)
	}
	return gb, nil
}

// shellWords splits a RUN line as sh would, for what the Dockerfile uses:
// words, "double" and 'single' quotes, ${VAR} and $VAR of vars. Anything
// that would make it more than one simple command is refused.
func shellWords(s string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '$' && quote != '\'':
			name, n := varName(s[i+1:])
			if name == "" {
				return nil, fmt.Errorf("%q: a $ the parser does not understand", s)
			}
			v, ok := vars[name]
			if !ok {
				return nil, fmt.Errorf("$%s: not an ARG of the stage", name)
			}
			cur.WriteString(v)
			inWord = true
			i += n
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.IndexByte(";&|<>()`\\*?", c) >= 0:
			return nil, fmt.Errorf("%q: %q: the parser reads one simple command only", s, c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unterminated %c", s, quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var braced = regexp.MustCompile(`^\{([A-Za-z_][A-Za-z0-9_]*)\}`)
var bare = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// varName reads the name after a $: {NAME} or NAME; n is how many bytes.
func varName(s string) (name string, n int) {
	if m := braced.FindStringSubmatch(s); m != nil {
		return m[1], len(m[0])
	}
	if m := bare.FindString(s); m != "" {
		return m, len(m)
	}
	return "", 0
}

// staticELF fails unless path is an ELF executable with no program
// interpreter: a dynamic one would need a libc the image does not have.
func staticELF(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := readInterp(p)
			return fmt.Errorf("%s: dynamically linked (interpreter %s): the image has no libc", path, interp)
		}
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s: ELF type %s, not an executable", path, f.Type)
	}
	return nil
}

func readInterp(p *elf.Prog) (string, error) {
	b := make([]byte, p.Filesz)
	if _, err := p.ReadAt(b, 0); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(b, "\x00")), nil
}
