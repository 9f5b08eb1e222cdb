package plan

import "github.com/rollplan/rollplan/planner/engine/native"

// testOptions are the default estimates with the model of the workloads'
// own controllers that every caller plans with (engines.Upstream).
var testOptions = func() Options {
	o := DefaultOptions
	o.Upstream = native.New()
	return o
}()
