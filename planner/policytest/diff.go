package policytest

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// lineDiff is a unified-style diff of want and got: hunks headed
// @@ -line,count +line,count @@, lines "- " only in want, "+ " only in got,
// "  " in both. It returns "" when they are equal.
func lineDiff(want, got []string) string {
	ops := diffOps(want, got)
	changed := false
	for _, o := range ops {
		if o.kind != ' ' {
			changed = true
			break
		}
	}
	if !changed {
		return ""
	}
	var sb strings.Builder
	for i := 0; i < len(ops); {
		// Find the next change and the hunk around it.
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-diffContext)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
			} else if j-end > 2*diffContext {
				break
			}
		}
		end = min(len(ops), end+diffContext+1)
		wl, gl, wn, gn := 0, 0, 0, 0
		for k := start; k < end; k++ {
			if ops[k].kind != '+' {
				if wn == 0 {
					wl = ops[k].w + 1
				}
				wn++
			}
			if ops[k].kind != '-' {
				if gn == 0 {
					gl = ops[k].g + 1
				}
				gn++
			}
		}
		fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", wl, wn, gl, gn)
		for k := start; k < end; k++ {
			fmt.Fprintf(&sb, "%c %s\n", ops[k].kind, ops[k].text)
		}
		i = end
	}
	return strings.TrimRight(sb.String(), "\n")
}

// listDiff shows every line of want and got, marked as lineDiff marks them,
// without hunk headers (for short lists).
func listDiff(want, got []string) string {
	var sb strings.Builder
	for _, o := range diffOps(want, got) {
		fmt.Fprintf(&sb, "%c %s\n", o.kind, o.text)
	}
	return strings.TrimRight(sb.String(), "\n")
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	text string
	w, g int // line indexes in want and got (for '-': w; '+': g; ' ': both)
}

// diffOps aligns the lines by a longest common subsequence.
func diffOps(a, b []string) []diffOp {
	// Trim the common prefix and suffix: plans differ in a few places.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for i := range pre {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(ma)*len(mb) > 4_000_000 {
		// Too large to align: all of want, then all of got.
		for i, s := range ma {
			ops = append(ops, diffOp{'-', s, pre + i, 0})
		}
		for j, s := range mb {
			ops = append(ops, diffOp{'+', s, 0, pre + j})
		}
	} else {
		n, m := len(ma), len(mb)
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', ma[i], pre + i, pre + j})
				i++
				j++
			case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
				ops = append(ops, diffOp{'+', mb[j], pre + i, pre + j})
				j++
			default:
				ops = append(ops, diffOp{'-', ma[i], pre + i, pre + j})
				i++
			}
		}
	}
	for k := suf; k > 0; k-- {
		ops = append(ops, diffOp{' ', a[len(a)-k], len(a) - k, len(b) - k})
	}
	return ops
}
