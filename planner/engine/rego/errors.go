package rego

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// regoError summarises an error of OPA's parser, compiler or evaluator in
// one line: where is "FILE:ROW" ("" when OPA gives no file), msg is
// "<kind> error: <message>", the kind taken from OPA's code
// (rego_parse_error: parse error), and with several errors, the first (in
// file order) and "(and N more)". ok is false for errors of another kind.
func regoError(err error) (where, msg string, ok bool) {
	var errs ast.Errors
	if errors.As(err, &errs) && len(errs) > 0 {
		errs.Sort()
		where, msg = at(errs[0].Location), astErrorLine(errs[0])
		if len(errs) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
		}
		return where, msg, true
	}
	var one *ast.Error
	if errors.As(err, &one) {
		return at(one.Location), astErrorLine(one), true
	}
	var te *topdown.Error
	if errors.As(err, &te) {
		return at(te.Location), kind(te.Code) + ": " + oneLine(te.Message), true
	}
	return "", "", false
}

// lineError shows a one-line summary of err and unwraps to err.
type lineError struct {
	line string
	err  error
}

func (e *lineError) Error() string { return e.line }
func (e *lineError) Unwrap() error { return e.err }

// oneLineError is err as one line: "FILE:ROW: <kind> error: <message>" for
// OPA's errors (see regoError), err itself otherwise.
func oneLineError(err error) error {
	where, msg, ok := regoError(err)
	if !ok {
		return err
	}
	if where != "" {
		msg = where + ": " + msg
	}
	return &lineError{line: msg, err: err}
}

func astErrorLine(e *ast.Error) string {
	s := kind(e.Code) + ": " + oneLine(e.Message)
	if e.Details != nil && e.Code != ast.ParseErr {
		// Type errors detail what a call has and wants; the other lines
		// quote the source and point at it with carets.
		var parts []string
		for _, l := range e.Details.Lines() {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "have: ") || strings.HasPrefix(l, "want: ") {
				parts = append(parts, l)
			}
		}
		if len(parts) > 0 {
			s += " (" + strings.Join(parts, "; ") + ")"
		}
	}
	return s
}

// at is "FILE:ROW", or "" without a file.
func at(l *ast.Location) string {
	if l == nil || l.File == "" {
		return ""
	}
	return l.File + ":" + strconv.Itoa(l.Row)
}

// kind names an OPA error code in words: rego_parse_error is "parse error",
// eval_conflict_error "conflict error".
func kind(code string) string {
	k := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(code, "rego_"), "eval_"), "_error")
	if k == "" {
		return "error"
	}
	return strings.ReplaceAll(k, "_", " ") + " error"
}

// oneLine joins a multi-line message ("...:\n  a\n  b") as "...: a, b".
func oneLine(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	out := strings.TrimSpace(lines[0])
	var rest []string
	for _, l := range lines[1:] {
		if l = strings.TrimSpace(l); l != "" {
			rest = append(rest, l)
		}
	}
	if len(rest) == 0 {
		return out
	}
	if !strings.HasSuffix(out, ":") {
		out += ":"
	}
	return out + " " + strings.Join(rest, ", ")
}
