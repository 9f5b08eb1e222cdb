package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/rollplan/rollplan/gate"
)

// kubeWarnings receives the API server's warnings for every client
// connectKubeconfig makes (rest.Config.WarningHandler).
var kubeWarnings = &warningPrinter{out: os.Stderr}

// warningPrinter is a rest.WarningHandler that prints each distinct
// warning of the API server (a Warning response header: a deprecated API,
// an admission webhook's warning such as rollplan gate's "rollplan: will
// update 6 pods in 3 waves", said to be the gate's) once, as a plain
// "warning: ..." line, like
// rollplan's other warnings. client-go's default handler logs them through
// klog instead (`I1122 08:14:20.860898 11262 warnings.go:107] "Warning:
// ..."`), in klog's format, amid rollplan's output, once per response.
type warningPrinter struct {
	mu   sync.Mutex
	out  io.Writer
	seen map[string]bool
}

// HandleWarningHeader prints the warning unless it was printed already.
// Only code 299 is a warning the API server sends (client-go's own
// handlers ignore the others too).
func (p *warningPrinter) HandleWarningHeader(code int, _ string, text string) {
	text = strings.Join(strings.Fields(text), " ") // one line
	if code != 299 || text == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[text] {
		return
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[text] = true
	for _, prefix := range gate.WarningPrefixes {
		if rest, ok := strings.CutPrefix(text, prefix); ok {
			// The API server passes a webhook's warnings on as they are:
			// on resume's or undo's write, the gate's plan would read as
			// theirs.
			text = "from admission webhook rollplan gate: " + rest
			break
		}
	}
	fmt.Fprintf(p.out, "warning: %s\n", text)
}

// redirect prints the warnings to w (apply: where its log goes, through
// the progress line on a terminal) until the returned function restores
// the previous output.
func (p *warningPrinter) redirect(w io.Writer) (restore func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.out
	p.out = w
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.out = prev
	}
}
