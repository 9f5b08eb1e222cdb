package render_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/render"
)

// BenchmarkRender prints one plan of synth.Snapshot(pods) in each format;
// bytes/op is the size of the output (the HTML page's, with every pod's
// explain in it).
//
//	go test ./planner/render -run '^$' -bench BenchmarkRender -benchmem
func BenchmarkRender(b *testing.B) {
	for _, pods := range []int{5000, 20000} {
		rollouts, err := facts.Build(synth.Snapshot(pods), facts.Options{Now: synth.Now})
		if err != nil {
			b.Fatal(err)
		}
		o := plan.DefaultOptions
		o.Upstream = native.New()
		res, err := plan.Build(context.Background(), rollouts, native.New(), plan.Metadata{}, o)
		if err != nil {
			b.Fatal(err)
		}
		for _, format := range render.PlanFormats {
			b.Run(fmt.Sprintf("pods=%d/%s", pods, format), func(b *testing.B) {
				r, err := render.Get(format)
				if err != nil {
					b.Fatal(err)
				}
				var out bytes.Buffer
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					out.Reset()
					if rr, ok := r.(render.ResultRenderer); ok {
						err = rr.RenderResult(&out, res.Plan, res)
					} else {
						err = r.Render(&out, res.Plan)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(out.Len()))
				b.ReportMetric(float64(out.Len())/(1<<20), "MiB-out")
			})
		}
	}
}
