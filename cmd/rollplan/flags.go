package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// A durationBound says which values a duration flag accepts. Every
// duration flag of every command is registered through durationVar with
// one, so that a negative or zero value never reaches a plan, a deadline or
// a ticker (TestDurationFlagsAreBounded checks that none is left out).
type durationBound int

const (
	// positive: > 0 (timeouts, TTLs).
	positive durationBound = iota
	// positiveSeconds: at least 1s. The plan's estimates and reservation
	// expiries count whole seconds, so 500ms would silently be 0.
	positiveSeconds
	// zeroOrPositive: 0 (the flag's "off", e.g. no limit) or > 0.
	zeroOrPositive
	// zeroOrSeconds: 0 (off) or at least 1s (intervals: a shorter one
	// would spin).
	zeroOrSeconds
)

// durationFlagType is the Type of a bounded duration flag, as pflag names
// its own (help shows "--timeout duration").
const durationFlagType = "duration"

// boundedDuration is a time.Duration flag value that rejects, when the flag
// is parsed, a value outside its bound. The error is a usageError (exit 2)
// naming the flag and the value as typed, whether or not the command runs
// under the root command.
type boundedDuration struct {
	p     *time.Duration
	name  string
	bound durationBound
	// def is the default, given as the example of a good value.
	def time.Duration
	// off says what 0 means, for zeroOrPositive and zeroOrSeconds ("no limit").
	off string
}

func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, def time.Duration, bound durationBound, usage string) {
	durationVarOff(fl, p, name, def, bound, "", usage)
}

// durationVarOff registers a flag whose 0 means off (zeroOrPositive,
// zeroOrSeconds).
func durationVarOff(fl *pflag.FlagSet, p *time.Duration, name string, def time.Duration, bound durationBound, off, usage string) {
	*p = def
	fl.Var(&boundedDuration{p: p, name: name, bound: bound, def: def, off: off}, name, usage)
}

func (d *boundedDuration) String() string {
	if d.p == nil {
		return "0s"
	}
	return d.p.String()
}

func (d *boundedDuration) Type() string { return durationFlagType }

func (d *boundedDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return usageError{fmt.Errorf("--%s %s: want a duration such as 90s, 5m or 1h30m", d.name, s)}
	}
	if err := d.check(s, v); err != nil {
		return usageError{err}
	}
	*d.p = v
	return nil
}

func (d *boundedDuration) check(s string, v time.Duration) error {
	eg := ""
	if d.def > 0 {
		eg = " such as " + shortDuration(d.def) + " (the default)"
	}
	switch d.bound {
	case positive:
		if v <= 0 {
			return fmt.Errorf("--%s %s: want a positive duration%s", d.name, s, eg)
		}
	case positiveSeconds:
		if v <= 0 {
			return fmt.Errorf("--%s %s: want a positive duration%s", d.name, s, eg)
		}
		if v < time.Second {
			return fmt.Errorf("--%s %s: want at least 1s, it counts whole seconds; pass a duration%s", d.name, s, eg)
		}
	case zeroOrPositive:
		if v < 0 {
			return fmt.Errorf("--%s %s: want a positive duration, or 0 for %s", d.name, s, d.off)
		}
	case zeroOrSeconds:
		if v < 0 || (v > 0 && v < time.Second) {
			return fmt.Errorf("--%s %s: want a duration of at least 1s%s, or 0 for %s", d.name, s, eg, d.off)
		}
	}
	return nil
}

// shortDuration is d as a person writes it: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
