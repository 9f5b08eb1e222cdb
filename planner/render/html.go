package render

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/explain"
	"github.com/rollplan/rollplan/planner/plan"
)

// HTML prints the plan as one self-contained page (`-o html`): per
// workload a header, a timeline of the waves over the estimated time, one
// row per pod grouped by zone and node in the order the plan acts on them,
// each budget's use against its limit, halts and stalls marked; selecting
// a pod shows its explain. The CSS and script are inlined and nothing is
// fetched, so the file opens offline; the same plan gives the same bytes.
//
// Render draws the plan alone (pods grouped by the node an action names);
// RenderResult adds what only the plan's details know: every pod's zone
// and node, and its explain.
type HTML struct{}

// Anchors: each pod row has the id PodAnchor(namespace, name), each wave
// bar WaveAnchor(...); opening the page at #pod/NS/NAME selects the pod
// and shows its explain (`rollplan explain POD --html FILE` prints such a
// link).
func PodAnchor(namespace, name string) string { return "pod/" + namespace + "/" + name }

// WaveAnchor is the id of wave index of a workload.
func WaveAnchor(kind, namespace, name string, index int) string {
	return fmt.Sprintf("wave/%s/%s/%s/%d", kind, namespace, name, index)
}

// collapse thresholds: a workload with more pod rows than collapseRows, or
// any workload of a page with more than collapsePageRows, shows its zones
// (and, within a zone of more than collapseRows pods, its nodes) as
// summary rows with counts that a click expands.
const (
	collapseRows     = 200
	collapsePageRows = 1000
)

//go:embed html/page.html.tmpl
var pageTemplate string

//go:embed html/page.css
var pageCSS string

//go:embed html/page.js
var pageJS string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	// pct: a 0..1000 track position as a percentage of the track.
	"pct": func(v float64) string { return strconv.FormatFloat(v/10, 'f', -1, 64) + "%" },
	// nameHead, nameTail: a pod name cut before its last "-" part, the
	// part that tells pods of one ReplicaSet or StatefulSet apart.
	"nameHead": func(name string) string { return name[:nameCut(name)] },
	"nameTail": func(name string) string { return name[nameCut(name):] },
}).Parse(pageTemplate))

// Render implements Renderer: the plan without its details.
func (h HTML) Render(w io.Writer, p *plan.Plan) error {
	return h.RenderResult(w, p, nil)
}

// RenderResult writes p with the details of res (nil: none). p may hold
// more workloads than res.Plan (those that could not be planned); details
// are matched to p's workloads by kind, namespace and name.
func (h HTML) RenderResult(w io.Writer, p *plan.Plan, res *plan.Result) error {
	v, err := h.buildPage(p, res)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, v); err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// pageView is what the template draws.
type pageView struct {
	Title     string
	Meta      plan.Metadata
	Gates     string
	CSS       template.CSS
	JS        template.JS
	Explain   template.JS // JSON: anchor → explain text
	Legend    []legendItem
	Workloads []*workloadView
	Pods      int
}

type legendItem struct{ Class, Label, Help string }

// legend: every class a row or mark can take, with its words.
var legend = []legendItem{
	{"inplace", "InPlaceUpdate", "the running pod is patched; no new pod"},
	{"recreate", "Recreate", "the old pod is deleted and a new one created (or a ReplicaSet scale-down removes it)"},
	{"surge", "Recreate (surge)", "the new pod is created first, the old one removed once it is available"},
	{"delete", "Delete", "the pod is removed and not replaced"},
	{"held", "held", "kept out of this rollout"},
	{"blocked", "blocked", "to update, but in no wave (halted, stalled, or nothing drives it)"},
	{"updated", "updated", "already at the update revision"},
	{"none", "no action", "to update, no action of its own (terminating, or removed outside the plan)"},
	{"cordon", "CordonNode", "the node is cordoned before its pod is updated"},
	{"drain", "DrainNode", "the node's other pods are evicted"},
	{"uncordon", "UncordonNode", "the node is uncordoned once its pod is available"},
	{"scale", "ScaleReplicaSet", "a Deployment's ReplicaSet is scaled"},
}

type workloadView struct {
	ID                          string
	Kind, Namespace, Name       string
	From, To, Pacing, Duration  string
	PodUpdatePolicy             string
	Managed                     bool
	Summary                     plan.Summary
	Error                       string
	Halted, Denied, Notes, Warn []string
	Stalled                     *plan.Stall
	Budgets                     []plan.Budget
	Ticks                       []tick
	Waves                       []*waveView
	Markers                     []marker
	Charts                      []budgetChart
	Zones                       []*zoneView
	Steps                       []rsStep
	ReplicaSets                 []rsLane
	Collapsed                   bool
	Rows                        int
}

type tick struct {
	X     float64
	Label string
	// End: the label ends at the tick (the last, at the track's end).
	End bool
}

type waveView struct {
	ID            string
	Index         int
	Start, End    string
	X, W          float64
	Actions, Pods int
	Title         string
	Binding       string
	// Bound: the budget that kept the next pods out of the wave.
	Bound string
}

type marker struct {
	Class, Label, Title string
	X                   float64
}

type budgetChart struct {
	Name, Type, Source string
	Limit, Peak, MaxY  int
	Path               string
	LimitY             float64
	Title              string
	Advisory           bool
	// Uncounted: the plan does not count the budget wave by wave.
	Uncounted bool
	Binds     []bindMark
}

type zoneView struct {
	Zone      string
	Label     string
	Count     int
	Counts    string
	Collapsed bool
	Nodes     []*nodeView
}

type nodeView struct {
	Node      string
	Label     string
	Count     int
	Counts    string
	Collapsed bool
	Actions   []nodeMark
	Pods      []*podRow
}

type nodeMark struct {
	Class, Label, Title string
	X, W                float64
}

type podRow struct {
	ID, Namespace, Name string
	Class, Label        string
	Wave                int
	Start               string
	X, W                float64
	// Title: what the plan says of the pod (its explain without details).
	Title string
	order int
}

// Short is the row's bar tooltip: the action and when.
func (r *podRow) Short() string {
	if r.Wave == 0 {
		return r.Label
	}
	return fmt.Sprintf("%s in wave %d, from %s", r.Label, r.Wave, r.Start)
}

// rsLane is one ReplicaSet of a Deployment over the waves: per wave
// that scales it, its replicas from the wave's first step to its last.
type rsLane struct {
	Name  string
	Steps []rsBar
}

type rsBar struct {
	Label, Title string
	X, W         float64
}

type podLink struct {
	Href template.URL
	Name string
}

// fragment is the link to an anchor of the page: "#" and the id with
// what a URL fragment cannot hold escaped ("/" stays, so links read as
// the ids do). A same-page fragment runs nothing, hence template.URL.
func fragment(id string) template.URL {
	return template.URL("#" + (&url.URL{Fragment: id}).EscapedFragment())
}

type rsStep struct {
	Wave       int
	WaveHref   template.URL
	ReplicaSet string
	From, To   int
	Removed    []podLink
	Reasons    string
}

// span is one wave's time: from its start to the next wave's (the
// estimated end for the last), in seconds.
type span struct{ start, end float64 }

func seconds(d string) float64 {
	if d == "" {
		return 0
	}
	v, err := plan.ParseDuration(d)
	if err != nil {
		return 0
	}
	return v
}

// timeScale maps seconds onto the 0..1000 width of every track.
type timeScale struct{ total float64 }

func (s timeScale) x(sec float64) float64 { return round1(sec / s.total * 1000) }

// minBar: the narrowest bar drawn (a wave that takes no time, such as a
// last scale-down, still shows).
const minBar = 8

// bar is where a span's bar is drawn: x and width, at least minBar wide
// and inside the track.
func (s timeScale) bar(sp span) (float64, float64) {
	x, w := s.x(sp.start), s.x(sp.end)-s.x(sp.start)
	if w < minBar {
		w = minBar
		x = min(x, 1000-minBar)
	}
	return x, w
}

func round1(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 1, 64), 64)
	return f
}

func (h HTML) buildPage(p *plan.Plan, res *plan.Result) (*pageView, error) {
	v := &pageView{Title: "rollplan plan", Meta: p.Metadata, CSS: template.CSS(pageCSS), JS: template.JS(pageJS), Legend: legend}
	var gates []string
	for _, name := range slices.Sorted(maps.Keys(p.Metadata.FeatureGates)) {
		gates = append(gates, fmt.Sprintf("%s=%t", name, p.Metadata.FeatureGates[name]))
	}
	v.Gates = strings.Join(gates, ", ")
	ex := explainTable{pods: map[string][]int{}, index: map[string]int{}}
	for i := range p.Workloads {
		wp := &p.Workloads[i]
		det, wi := detailFor(res, wp)
		wv := buildWorkload(wp, det)
		podIndex := map[string]int{}
		if det != nil {
			for i := range det.Facts.Pods {
				podIndex[det.Facts.Pods[i].Name] = i
			}
		}
		for _, z := range wv.Zones {
			for _, n := range z.Nodes {
				for _, r := range n.Pods {
					text, err := h.podExplain(res, wi, podIndex, r)
					if err != nil {
						return nil, fmt.Errorf("render html: explain pod %s/%s: %w", r.Namespace, r.Name, err)
					}
					ex.add(r.ID, text)
				}
			}
		}
		v.Pods += wv.Rows
		v.Workloads = append(v.Workloads, wv)
	}
	for _, wv := range v.Workloads {
		if wv.Rows > collapseRows || v.Pods > collapsePageRows {
			wv.collapse()
		}
	}
	if len(p.Workloads) == 1 {
		w := p.Workloads[0]
		v.Title = fmt.Sprintf("rollplan plan: %s %s/%s", w.Kind, w.Namespace, w.Name)
	}
	b, err := json.Marshal(struct {
		Lines []string         `json:"lines"`
		Pods  map[string][]int `json:"pods"`
	}{ex.lines, ex.pods}) // sorted keys; <, > and & escaped for a script
	if err != nil {
		return nil, fmt.Errorf("render html: the explain of the pods: %w", err)
	}
	v.Explain = template.JS(b)
	return v, nil
}

// explainTable holds every pod's explain as indexes into one list of
// distinct lines: the pods of a workload share most of theirs (budgets,
// versions, waves), which keeps a 5,000-pod page a few megabytes.
type explainTable struct {
	lines []string
	index map[string]int
	pods  map[string][]int
}

func (t *explainTable) add(id, text string) {
	idx := []int{}
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		i, ok := t.index[l]
		if !ok {
			i = len(t.lines)
			t.index[l] = i
			t.lines = append(t.lines, l)
		}
		idx = append(idx, i)
	}
	t.pods[id] = idx
}

// detailFor is the detail of wp in res, and its index, or nil.
func detailFor(res *plan.Result, wp *plan.WorkloadPlan) (*plan.Detail, int) {
	if res == nil || wp.Error != "" {
		return nil, -1
	}
	for i, d := range res.Details {
		if d == nil || d.Facts == nil {
			continue
		}
		w := d.Facts.Workload
		if w.Kind == wp.Kind && w.Namespace == wp.Namespace && w.Name == wp.Name {
			return d, i
		}
	}
	return nil, -1
}

// collapse folds every zone, and the nodes of a big zone, into summary rows.
func (wv *workloadView) collapse() {
	wv.Collapsed = true
	for _, z := range wv.Zones {
		z.Collapsed = true
		if z.Count > collapseRows {
			for _, n := range z.Nodes {
				n.Collapsed = true
			}
		}
	}
}

func buildWorkload(wp *plan.WorkloadPlan, det *plan.Detail) *workloadView {
	wv := &workloadView{
		ID:   "workload/" + wp.Kind + "/" + wp.Namespace + "/" + wp.Name,
		Kind: wp.Kind, Namespace: wp.Namespace, Name: wp.Name,
		From: wp.FromRevision, To: wp.ToRevision, Pacing: wp.Pacing, Duration: wp.EstimatedDuration,
		PodUpdatePolicy: wp.PodUpdatePolicy, Managed: wp.Managed,
		Summary: wp.Summary, Error: wp.Error, Halted: wp.Halted, Denied: wp.Denied,
		Notes: wp.Notes, Warn: wp.Warnings, Stalled: wp.Stalled, Budgets: wp.Budgets,
	}
	if wp.Error != "" {
		return wv
	}
	spans, ts := waveSpans(wp)
	wv.Ticks = ticks(ts.total)
	for i, w := range wp.Waves {
		s := spans[i]
		wave := &waveView{
			ID: WaveAnchor(wp.Kind, wp.Namespace, wp.Name, w.Index), Index: w.Index,
			Start: w.Start, End: formatSeconds(s.end),
			Actions: len(w.Actions),
		}
		wave.X, wave.W = ts.bar(s)
		for _, a := range w.Actions {
			if a.Pod != "" {
				wave.Pods++
			}
			wave.Pods += len(a.Pods)
			if a.Type == plan.ActionDrainNode {
				wave.Pods -= len(a.Pods) // evicted pods are not the workload's
			}
		}
		wave.Title = fmt.Sprintf("wave %d of %d: %s to %s, %s", w.Index, len(wp.Waves), w.Start, wave.End, fmt.Sprintf("%d %s", wave.Actions, plural.Noun(wave.Actions, "action", "actions")))
		wave.Binding = waveBinding(&w)
		if w.Binding != nil {
			wave.Bound = w.Binding.Budget
		}
		if wave.Binding != "" {
			wave.Title += "; " + wave.Binding
		}
		wv.Waves = append(wv.Waves, wave)
	}
	wv.Markers = append(wv.Markers, stopMarkers(wp, spans, ts)...) // html_gates.go
	if st := wp.Stalled; st != nil {
		wv.Markers = append(wv.Markers, marker{Class: "stall", Label: "stalled after " + st.After, Title: "stalled after " + st.After + ": " + st.Reason, X: ts.x(seconds(st.After))})
	}
	wv.Charts = budgetCharts(wp, spans, ts)
	wv.Zones, wv.Rows = podRows(wp, det, spans, ts)
	wv.Steps = replicaSetSteps(wp)
	wv.ReplicaSets = replicaSetLanes(wp, spans, ts)
	return wv
}

// waveSpans: each wave from its start to the next one's, the last to the
// estimated end; the scale covers the end, a stall, and at least a second.
func waveSpans(wp *plan.WorkloadPlan) ([]span, timeScale) {
	end := seconds(wp.EstimatedDuration)
	spans := make([]span, len(wp.Waves))
	for i, w := range wp.Waves {
		spans[i].start = seconds(w.Start)
		end = max(end, spans[i].start)
	}
	for i := range spans {
		if i+1 < len(spans) {
			spans[i].end = spans[i+1].start
		} else {
			spans[i].end = end
		}
	}
	if n := len(spans); n > 0 {
		// A last wave that ends as it starts (a Deployment's final
		// scale-down: the estimate ends with its start) would be a
		// sliver at the axis's end: it is drawn as long as the waves
		// before it take on average, or a second alone.
		last := &spans[n-1]
		typical := 1.0
		if n > 1 {
			typical = last.start / float64(n-1)
		}
		if last.end-last.start < typical/2 {
			last.end = last.start + typical
			end = max(end, last.end)
		}
	}
	total := end
	if wp.Stalled != nil {
		total = max(total, seconds(wp.Stalled.After))
	}
	if total <= 0 {
		total = 1
	}
	return spans, timeScale{total: total}
}

// ticks: about five labelled times along the axis, at round steps.
func ticks(total float64) []tick {
	steps := []float64{1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400}
	// Past the list, whole days: never more than about six ticks, however
	// long the rollout (a huge StatefulSet created one replica at a time).
	step := math.Ceil(total/6/86400) * 86400
	for _, s := range steps {
		if total/s <= 6 {
			step = s
			break
		}
	}
	var out []tick
	for t := 0.0; t <= total+1e-9; t += step {
		x := round1(t / total * 1000)
		out = append(out, tick{X: x, Label: formatSeconds(t), End: x > 950})
	}
	return out
}

// formatSeconds prints a duration as the plan does ("1m20s", "0s").
func formatSeconds(sec float64) string {
	if sec >= 1e9 { // beyond time.Duration's range soon after: hours
		return strconv.FormatFloat(math.Floor(sec/3600), 'f', 0, 64) + "h"
	}
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// podRows lays out one row per pod, grouped by zone and then node, zones
// and nodes in the order of their first pod in the plan's actions, pods
// in action order; pods no action names follow in the facts' order (by
// name). Without details, the pods are those the plan names, under the
// node an action names (else none).
func podRows(wp *plan.WorkloadPlan, det *plan.Detail, spans []span, ts timeScale) ([]*zoneView, int) {
	type place struct{ zone, node string }
	rows := map[string]*podRow{}
	var order []string
	placeOf := map[string]place{}
	add := func(name string, r *podRow) {
		if _, ok := rows[name]; ok {
			return
		}
		r.ID, r.Namespace, r.Name, r.order = PodAnchor(wp.Namespace, name), wp.Namespace, name, len(order)
		rows[name] = r
		order = append(order, name)
	}
	bar := func(i int) (float64, float64) { return ts.bar(spans[i]) }
	nodeActs := map[string][]nodeMark{}
	for i, w := range wp.Waves {
		for _, a := range w.Actions {
			x, width := bar(i)
			switch {
			case a.Pod != "":
				class, label := "recreate", a.Type
				switch {
				case a.Type == plan.ActionInPlace:
					class = "inplace"
				case a.Type == plan.ActionDelete:
					class = "delete"
				case a.Surge:
					class, label = "surge", a.Type+" (surge)"
				}
				add(a.Pod, &podRow{Class: class, Label: label, Wave: w.Index, Start: w.Start, X: x, W: width,
					Title: fmt.Sprintf("%s in wave %d (%s): %s", label, w.Index, w.Start, strings.Join(a.Reasons, "; "))})
				if a.Node != "" {
					placeOf[a.Pod] = place{node: a.Node}
				}
			case a.Type == plan.ActionScaleRS:
				for _, pod := range a.Pods {
					add(pod, &podRow{Class: "recreate", Label: "Recreate (scale-down)", Wave: w.Index, Start: w.Start, X: x, W: width,
						Title: fmt.Sprintf("removed in wave %d (%s) by scaling ReplicaSet %s from %d to %d: %s", w.Index, w.Start, a.ReplicaSet, deref(a.From), deref(a.To), strings.Join(a.Reasons, "; "))})
				}
			case a.Node != "":
				// Within the wave: cordon first, then drain, the pod's
				// own action, and uncordon at the end.
				na := nodeMark{}
				from, to := 0.0, 0.2
				switch a.Type {
				case plan.ActionCordonNode:
					na.Class, na.Label = "cordon", "Cordon"
				case plan.ActionDrainNode:
					na.Class, na.Label = "drain", "Drain"
					from, to = 0.2, 0.45
					if len(a.Pods) > 0 {
						na.Label = fmt.Sprintf("Drain (evicts %d)", len(a.Pods))
					}
				default:
					na.Class, na.Label = "uncordon", "Uncordon"
					from, to = 0.8, 1
				}
				na.X, na.W = round1(x+width*from), round1(width*(to-from))
				na.Title = fmt.Sprintf("%s node %s in wave %d (%s): %s", a.Type, a.Node, w.Index, w.Start, strings.Join(a.Reasons, "; "))
				nodeActs[a.Node] = append(nodeActs[a.Node], na)
			}
		}
	}
	for _, h := range wp.Held {
		add(h.Pod, &podRow{Class: "held", Label: "held", Title: "held: " + h.Reason})
	}
	for _, h := range wp.Blocked {
		add(h.Pod, &podRow{Class: "blocked", Label: "blocked", Title: "blocked: " + h.Reason})
	}
	if det != nil && det.Facts != nil {
		for i := range det.Facts.Pods {
			fp := &det.Facts.Pods[i]
			switch {
			case fp.Updated:
				add(fp.Name, &podRow{Class: "updated", Label: "updated", Title: "already at the update revision " + fp.Revision})
			case fp.Terminating:
				add(fp.Name, &podRow{Class: "none", Label: "terminating", Title: "terminating: no action of its own"})
			default:
				add(fp.Name, &podRow{Class: "none", Label: "no action", Title: "no action of its own in the plan"})
			}
			placeOf[fp.Name] = place{zone: fp.Zone, node: fp.Node}
		}
	}
	// Every pod of a node in the plan's order, and nodes that only have
	// node actions, under their node.
	zones := []*zoneView{}
	zoneIdx := map[string]*zoneView{}
	nodeIdx := map[place]*nodeView{}
	group := func(pl place) *nodeView {
		if n, ok := nodeIdx[pl]; ok {
			return n
		}
		z, ok := zoneIdx[pl.zone]
		if !ok {
			z = &zoneView{Zone: pl.zone, Label: orUnknown(pl.zone, "zone")}
			zoneIdx[pl.zone] = z
			zones = append(zones, z)
		}
		n := &nodeView{Node: pl.node, Label: orUnknown(pl.node, "node"), Actions: nodeActs[pl.node]}
		nodeIdx[pl] = n
		z.Nodes = append(z.Nodes, n)
		return n
	}
	for _, name := range order {
		if r := rows[name]; r.Wave == 0 {
			r.W = 1000 // no wave: the whole rollout long
		}
		n := group(placeOf[name])
		n.Pods = append(n.Pods, rows[name])
	}
	for _, w := range wp.Waves { // nodes prepared with no pod of ours in a row
		for _, a := range w.Actions {
			if a.Pod == "" && a.Node != "" && a.Type != plan.ActionScaleRS {
				found := false
				for pl := range nodeIdx {
					if pl.node == a.Node {
						found = true
						break
					}
				}
				if !found {
					group(place{node: a.Node})
				}
			}
		}
	}
	for _, z := range zones {
		var zc counts
		for _, n := range z.Nodes {
			var nc counts
			for _, r := range n.Pods {
				nc.add(r.Class)
				zc.add(r.Class)
			}
			n.Count, n.Counts = len(n.Pods), nc.String()
			z.Count += n.Count
		}
		z.Counts = zc.String()
	}
	return zones, len(order)
}

func orUnknown(s, what string) string {
	if s == "" {
		return "(" + what + " unknown)"
	}
	return s
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// counts: pods of a group by class, in the legend's order.
type counts map[string]int

func (c *counts) add(class string) {
	if *c == nil {
		*c = counts{}
	}
	(*c)[class]++
}

func (c counts) String() string {
	var parts []string
	for _, l := range legend {
		if n := c[l.Class]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, l.Label))
		}
	}
	return strings.Join(parts, ", ")
}

// replicaSetLanes draws each ReplicaSet a Deployment's waves scale, in
// the order they first scale it.
func replicaSetLanes(wp *plan.WorkloadPlan, spans []span, ts timeScale) []rsLane {
	var lanes []rsLane
	index := map[string]int{}
	for i, w := range wp.Waves {
		type fromTo struct{ from, to, steps int }
		scaled := map[string]*fromTo{}
		var order []string
		for _, a := range w.Actions {
			if a.Type != plan.ActionScaleRS {
				continue
			}
			if ft, ok := scaled[a.ReplicaSet]; ok {
				ft.to, ft.steps = deref(a.To), ft.steps+1
				continue
			}
			scaled[a.ReplicaSet] = &fromTo{deref(a.From), deref(a.To), 1}
			order = append(order, a.ReplicaSet)
		}
		for _, rs := range order {
			li, ok := index[rs]
			if !ok {
				li = len(lanes)
				index[rs] = li
				lanes = append(lanes, rsLane{Name: rs})
			}
			ft := scaled[rs]
			x, width := ts.bar(spans[i])
			lanes[li].Steps = append(lanes[li].Steps, rsBar{
				Label: fmt.Sprintf("%d→%d", ft.from, ft.to),
				Title: fmt.Sprintf("wave %d (%s): ReplicaSet %s from %d to %s in %s", w.Index, w.Start, rs, ft.from, plural.Count(ft.to, "replica", "replicas"), plural.Count(ft.steps, "step", "steps")),
				X:     x, W: width,
			})
		}
	}
	return lanes
}

// replicaSetSteps lists a Deployment's ScaleReplicaSet actions.
func replicaSetSteps(wp *plan.WorkloadPlan) []rsStep {
	var out []rsStep
	for _, w := range wp.Waves {
		for _, a := range w.Actions {
			if a.Type != plan.ActionScaleRS {
				continue
			}
			st := rsStep{Wave: w.Index, WaveHref: fragment(WaveAnchor(wp.Kind, wp.Namespace, wp.Name, w.Index)), ReplicaSet: a.ReplicaSet,
				From: deref(a.From), To: deref(a.To), Reasons: strings.Join(a.Reasons, "; ")}
			for _, p := range a.Pods {
				st.Removed = append(st.Removed, podLink{Href: fragment(PodAnchor(wp.Namespace, p)), Name: p})
			}
			out = append(out, st)
		}
	}
	return out
}

// podExplain is the text a selected pod row shows: its explain
// (planner/explain, as `rollplan explain` prints it) when the page has the
// details, else what the plan says of it.
func (HTML) podExplain(res *plan.Result, workload int, podIndex map[string]int, r *podRow) (string, error) {
	i, ok := podIndex[r.Name]
	if workload < 0 || !ok {
		return fmt.Sprintf("pod %s/%s\n%s", r.Namespace, r.Name, r.Title), nil
	}
	var b strings.Builder
	if err := explain.Pod(res, workload, i).WriteText(&b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// nameCut: where a pod name's distinguishing suffix starts (at its last
// "-"; the end for a name without one).
func nameCut(name string) int {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		return i
	}
	return len(name)
}
