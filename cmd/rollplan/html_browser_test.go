package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/rollplan/rollplan/internal/synth"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// artifactDir keeps each page's screenshot (relative to the repository
// root, where the tests run).
const artifactDir = "bin/test-artifacts"

// chromiumPath finds the browser the HTML test drives: $ROLLPLAN_CHROMIUM,
// else chromium (Debian's package) or chromium-browser on PATH. Without it
// the test fails: CI installs it (.ci/run), and a skipped browser test
// would pass without testing anything.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ROLLPLAN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found on PATH: the HTML plan test drives a real browser; install it (Debian/Ubuntu: sudo apt-get install --no-install-recommends chromium) or set ROLLPLAN_CHROMIUM to its path")
	return ""
}

// browser starts one headless Chromium for a test, on a fresh profile
// and with everything that would reach the network off.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[chromedp.Void]("1")); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return bctx
}

// page is a tab on a file, with every console error and uncaught
// exception it reports.
type page struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func openPage(t *testing.T, bctx context.Context, file, fragment string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelTimeout)
	p := &page{ctx: ctx}
	// Every console call of type error, uncaught exception and browser
	// log entry of level error, from the page's first script on.
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == "assert" {
				p.mu.Lock()
				p.errors = append(p.errors, m.String())
				p.mu.Unlock()
			}
		}
	}()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + abs
	if fragment != "" {
		url += "#" + fragment
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return p
}

func (p *page) eval(t *testing.T, js string, out any) {
	t.Helper()
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]byte](js))
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
}

func (p *page) noErrors(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errors {
		t.Errorf("page reported %s", e)
	}
}

func (p *page) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(artifactDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artifactDir, "plan-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	t.Logf("screenshot: %s", abs)
}

// workloadDOM is what the page draws of one workload.
type workloadDOM struct {
	ID         string `json:"id"`
	WaveBars   int    `json:"waveBars"`
	WaveIDs    int    `json:"waveIDs"`
	PodRows    int    `json:"podRows"`
	VisiblePod int    `json:"visiblePods"`
	ZoneRows   int    `json:"zoneRows"`
	ZoneCount  int    `json:"zoneCount"`
	Collapsed  int    `json:"collapsed"`
	Budgets    []struct {
		Name   string `json:"name"`
		Lines  int    `json:"lines"`
		Limits int    `json:"limits"`
		Limit  int    `json:"limit"`
		Peak   int    `json:"peak"`
		Binds  int    `json:"binds"`
	} `json:"budgets"`
	Halts     int      `json:"halts"`
	Stalls    int      `json:"stalls"`
	Gates     []string `json:"gates"`
	Rollbacks int      `json:"rollbacks"`
	Legend    int      `json:"legend"`
}

const domJS = `Array.from(document.querySelectorAll("section.workload")).map(function (s) {
  var visible = function (el) { return el.offsetParent !== null; };
  var zones = Array.from(s.querySelectorAll(".zone-row"));
  return {
    id: s.id,
    waveBars: s.querySelectorAll(".timeline .wave-bar").length,
    waveIDs: Array.from(s.querySelectorAll(".wave-bar")).filter(function (w) { return w.id.indexOf("wave/") === 0; }).length,
    podRows: s.querySelectorAll(".pod-row").length,
    visiblePods: Array.from(s.querySelectorAll(".pod-row")).filter(visible).length,
    zoneRows: zones.length,
    zoneCount: zones.reduce(function (n, z) { return n + Number(z.dataset.count); }, 0),
    collapsed: zones.filter(function (z) { return z.getAttribute("aria-expanded") === "false"; }).length,
    budgets: Array.from(s.querySelectorAll(".budget")).map(function (b) {
      return { name: b.dataset.budget, lines: b.querySelectorAll("path.budget-line").length, limits: b.querySelectorAll("line.limit-line").length,
        limit: Number(b.dataset.limit), peak: Number(b.dataset.peak), binds: b.querySelectorAll(".bind-mark").length };
    }),
    halts: s.querySelectorAll(".timeline .marker-halt").length,
    stalls: s.querySelectorAll(".timeline .marker-stall").length,
    gates: Array.from(s.querySelectorAll(".timeline .marker-gate")).map(function (g) { return g.querySelector("text").textContent; }),
    rollbacks: s.querySelectorAll(".timeline .marker-rollback").length,
    legend: document.querySelectorAll(".legend li").length
  };
})`

// TestHTMLInBrowser opens `plan -o html` pages of bundled scenarios and of
// a 5,000-pod synthetic snapshot in headless Chromium and checks what the
// page draws against the plan's JSON: wave bars, pod rows (or group rows
// whose counts add up to the pods), a line and a limit per budget, halt,
// stall, gate and rollback marks, the explain a selected pod shows, groups that expand,
// anchors that select a pod, and no console error or uncaught exception.
// Each page's screenshot is kept in bin/test-artifacts.
func TestHTMLInBrowser(t *testing.T) {
	bctx := browser(t)
	dir := t.TempDir()
	synthFile := filepath.Join(dir, "synth-5000.yaml")
	b, err := capture.Marshal(synth.Snapshot(5000), capture.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(synthFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		// collapsed: the page folds its groups (more than the rows a page shows open)
		collapsed bool
		halted    bool
		stalled   bool
	}{
		{name: "sts-inplace-image-only", args: scenarioArgs(t, "testdata/scenarios/sts-inplace-image-only")},
		{name: "example-cordon-nodes", args: scenarioArgs(t, "testdata/scenarios/example-cordon-nodes")},
		{name: "deploy-rolling-10-25pct", args: scenarioArgs(t, "testdata/scenarios/deploy-rolling-10-25pct")},
		{name: "example-one-zone-at-a-time", args: scenarioArgs(t, "testdata/scenarios/example-one-zone-at-a-time")},
		{name: "sts-inplaceonly-halt", args: scenarioArgs(t, "testdata/scenarios/sts-inplaceonly-halt"), halted: true},
		{name: "stalled-plan", args: scenarioArgs(t, "testdata/scenarios/stalled-plan"), stalled: true},
		{name: "analysis-inconclusive", args: scenarioArgs(t, "testdata/scenarios/analysis-inconclusive"), halted: true},
		{name: "analysis-failed-rollback", args: scenarioArgs(t, "testdata/scenarios/analysis-failed-rollback")},
		{name: "synth-5000", args: []string{"--now", synth.Now.Format(time.RFC3339)}, collapsed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := filepath.Join("testdata/scenarios", tc.name, "snapshot.yaml")
			if tc.name == "synth-5000" {
				snap = synthFile
			}
			args := append([]string{"plan", "-f", snap, "--allow-halted"}, tc.args...)
			start := time.Now()
			html, stderr, err := run(t, append(args, "-o", "html")...)
			if err != nil {
				t.Fatalf("plan -o html: %v\n%s", err, stderr)
			}
			rendered := time.Since(start)
			js, stderr, err := run(t, append(args, "-o", "json")...)
			if err != nil {
				t.Fatalf("plan -o json: %v\n%s", err, stderr)
			}
			var p plan.Plan
			if err := json.Unmarshal([]byte(js), &p); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, tc.name+".html")
			if err := os.WriteFile(file, []byte(html), 0o644); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			pg := openPage(t, bctx, file, "")
			loaded := time.Since(start)
			var nav struct {
				Interactive float64 `json:"domInteractive"`
				Loaded      float64 `json:"loadEventEnd"`
			}
			pg.eval(t, `performance.getEntriesByType("navigation")[0].toJSON()`, &nav)
			var dom []workloadDOM
			pg.eval(t, domJS, &dom)
			t.Logf("%d workloads, %d bytes: planned and rendered in %s; the browser parsed it in %.0fms, ran the script and loaded it in %.0fms (%s in all)",
				len(p.Workloads), len(html), rendered.Round(time.Millisecond), nav.Interactive, nav.Loaded, loaded.Round(time.Millisecond))
			if len(dom) != len(p.Workloads) {
				t.Fatalf("page draws %d workloads, the plan has %d", len(dom), len(p.Workloads))
			}
			var halted, stalled bool
			for i, wp := range p.Workloads {
				d := dom[i]
				if want := "workload/" + wp.Kind + "/" + wp.Namespace + "/" + wp.Name; d.ID != want {
					t.Fatalf("workload %d is %s, want %s", i, d.ID, want)
				}
				if d.WaveBars != len(wp.Waves) || d.WaveIDs != len(wp.Waves) {
					t.Errorf("%s: %d wave bars (%d with an anchor), the plan has %d waves", d.ID, d.WaveBars, d.WaveIDs, len(wp.Waves))
				}
				if d.PodRows != wp.Summary.Pods {
					t.Errorf("%s: %d pod rows, the plan counts %d pods", d.ID, d.PodRows, wp.Summary.Pods)
				}
				if d.ZoneCount != wp.Summary.Pods {
					t.Errorf("%s: zone rows count %d pods, the plan %d", d.ID, d.ZoneCount, wp.Summary.Pods)
				}
				if tc.collapsed {
					if d.Collapsed != d.ZoneRows || d.VisiblePod != 0 {
						t.Errorf("%s: %d of %d zones collapsed and %d pod rows shown; want all collapsed, none shown", d.ID, d.Collapsed, d.ZoneRows, d.VisiblePod)
					}
				} else if d.Collapsed != 0 || d.VisiblePod != d.PodRows {
					t.Errorf("%s: %d zones collapsed, %d of %d pod rows shown; want all shown", d.ID, d.Collapsed, d.VisiblePod, d.PodRows)
				}
				if len(d.Budgets) != len(wp.Budgets) {
					t.Errorf("%s: %d budget charts, the plan has %d budgets", d.ID, len(d.Budgets), len(wp.Budgets))
				}
				for j, b := range d.Budgets {
					if j >= len(wp.Budgets) {
						break
					}
					pb := wp.Budgets[j]
					if b.Name != pb.Name || b.Lines != 1 || b.Limits != 1 {
						t.Errorf("%s: budget chart %d is %s with %d use lines and %d limit lines; want %s with one of each", d.ID, j, b.Name, b.Lines, b.Limits, pb.Name)
					}
					// The line's peak is the most any wave has in use, its
					// dots the waves this budget binds.
					peak, binds := pb.InUse, 0
					for _, w := range wp.Waves {
						for _, wb := range w.Budgets {
							if wb.Name == pb.Name && !wb.Uncounted {
								peak = max(peak, wb.InUse)
							}
						}
						if w.Binding != nil && w.Binding.Budget == pb.Name {
							binds++
						}
					}
					if b.Limit != pb.Limit || b.Peak != peak || b.Binds != binds {
						t.Errorf("%s: budget %s drawn with limit %d, peak %d, %d binding marks; the plan says %d, %d, %d", d.ID, b.Name, b.Limit, b.Peak, b.Binds, pb.Limit, peak, binds)
					}
				}
				if want := min(len(wp.Halted), 1); d.Halts != want {
					t.Errorf("%s: %d halt marks, the plan has %d halt reasons", d.ID, d.Halts, len(wp.Halted))
				}
				if want := wp.Stalled != nil; (d.Stalls == 1) != want || d.Stalls > 1 {
					t.Errorf("%s: %d stall marks, stalled %t", d.ID, d.Stalls, want)
				}
				// A mark per gated wave, labelled with its status.
				var gates []string
				for _, w := range wp.Waves {
					if w.Gate != nil {
						gates = append(gates, w.Gate.Status)
					}
				}
				if strings.Join(d.Gates, ",") != strings.Join(gates, ",") {
					t.Errorf("%s: gate marks %v, the plan's gates %v", d.ID, d.Gates, gates)
				}
				if want := wp.Rollback != nil; (d.Rollbacks == 1) != want || d.Rollbacks > 1 {
					t.Errorf("%s: %d rollback marks, rollback %t", d.ID, d.Rollbacks, want)
				}
				halted = halted || len(wp.Halted) > 0
				stalled = stalled || wp.Stalled != nil
				if d.Legend < 12 {
					t.Errorf("legend has %d entries", d.Legend)
				}
			}
			if halted != tc.halted || stalled != tc.stalled {
				t.Errorf("plan halted %t, stalled %t; the case expects %t, %t", halted, stalled, tc.halted, tc.stalled)
			}
			pg.screenshot(t, tc.name)
			if tc.collapsed {
				expandFirstZone(t, pg, dom)
			}
			selectPod(t, pg, &p)
			pg.screenshot(t, tc.name+"-selected")
			pg.noErrors(t)
			followAnchor(t, bctx, file, pg)
		})
	}
}

// TestExplainHTMLLink follows the link `explain POD --html FILE` prints:
// the page it opens selects the pod and shows its explain.
func TestExplainHTMLLink(t *testing.T) {
	bctx := browser(t)
	file := filepath.Join(t.TempDir(), "plan.html")
	dir := "testdata/scenarios/example-leader-last"
	args := append([]string{"explain", "web-4", "-f", dir + "/snapshot.yaml", "--html", file}, scenarioArgs(t, dir)...)
	out, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("explain --html: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, "pod default/web-4 of StatefulSet web\n") {
		t.Errorf("explain --html prints on stdout:\n%s", out)
	}
	_, link, ok := strings.Cut(stderr, "plan: ")
	link = strings.TrimSpace(link)
	abs, _ := filepath.Abs(file)
	if want := "file://" + abs + "#pod/default/web-4"; !ok || link != want {
		t.Fatalf("explain --html printed link %q, want %q (stderr:\n%s)", link, want, stderr)
	}
	path, fragment, _ := strings.Cut(strings.TrimPrefix(link, "file://"), "#")
	pg := openPage(t, bctx, path, fragment)
	var got struct {
		Selected bool   `json:"selected"`
		Text     string `json:"text"`
	}
	pg.eval(t, `({ selected: document.getElementById("pod/default/web-4").classList.contains("selected"), text: document.getElementById("explain-text").textContent })`, &got)
	if !got.Selected || !strings.HasPrefix(got.Text, "pod default/web-4 of StatefulSet web\n") || !strings.Contains(out, strings.TrimSpace(got.Text)) {
		t.Errorf("page at %s: selected %t, explain:\n%s\nwant what explain printed:\n%s", link, got.Selected, got.Text, out)
	}
	pg.screenshot(t, "explain-link")
	pg.noErrors(t)
}

// expandFirstZone clicks the first zone row of the biggest workload and
// checks that its pod rows (or node rows) show.
func expandFirstZone(t *testing.T, pg *page, dom []workloadDOM) {
	t.Helper()
	big := 0
	for i, d := range dom {
		if d.PodRows > dom[big].PodRows {
			big = i
		}
	}
	zone := fmt.Sprintf(`document.getElementById(%q).querySelector(".zone-row")`, dom[big].ID)
	if err := chromedp.Do(pg.ctx, chromedp.Click(chromedp.JSPath(zone))); err != nil {
		t.Fatalf("click the first zone of %s: %v", dom[big].ID, err)
	}
	var got struct {
		Expanded string `json:"expanded"`
		Count    int    `json:"count"`
		Rows     int    `json:"rows"`
		Shown    int    `json:"shown"`
	}
	pg.eval(t, `(function () { var z = `+zone+`; var rows = Array.from(z.parentElement.querySelectorAll(".node-row, .pod-row"));
	  return { expanded: z.getAttribute("aria-expanded"), count: Number(z.dataset.count), rows: z.parentElement.querySelectorAll(".pod-row").length,
	    shown: rows.filter(function (r) { return r.offsetParent !== null; }).length }; })()`, &got)
	if got.Expanded != "true" || got.Rows != got.Count || got.Shown == 0 {
		t.Errorf("%s: after a click the first zone is expanded=%s with %d pod rows for a count of %d, %d rows shown; want expanded, rows = count, some shown", dom[big].ID, got.Expanded, got.Rows, got.Count, got.Shown)
	}
	// Enter on the focused zone row folds it again.
	if err := chromedp.Do(pg.ctx, chromedp.Focus(chromedp.JSPath(zone)), chromedp.KeyEvent("\r")); err != nil {
		t.Fatalf("press Enter on the first zone of %s: %v", dom[big].ID, err)
	}
	var folded bool
	pg.eval(t, zone+`.getAttribute("aria-expanded") === "false" && `+zone+`.nextElementSibling.hidden`, &folded)
	if !folded {
		t.Errorf("%s: Enter on the expanded first zone does not fold it", dom[big].ID)
	}
	// Space opens it again, without scrolling the page (the rest of the
	// test selects a pod in it).
	var before, after float64
	pg.eval(t, `window.scrollY`, &before)
	if err := chromedp.Do(pg.ctx, chromedp.KeyEvent(" ")); err != nil {
		t.Fatalf("press Space on the first zone of %s: %v", dom[big].ID, err)
	}
	pg.eval(t, zone+`.getAttribute("aria-expanded") === "true" && !`+zone+`.nextElementSibling.hidden`, &folded)
	time.Sleep(500 * time.Millisecond) // a keyboard scroll is animated
	pg.eval(t, `window.scrollY`, &after)
	if !folded || after != before {
		t.Errorf("%s: Space on the folded first zone: expanded %t, the page scrolled from %g to %g; want expanded, no scroll", dom[big].ID, folded, before, after)
	}
}

// selectPod clicks the first pod row shown (one in a wave if any) and
// checks that the explain names the pod and its wave.
func selectPod(t *testing.T, pg *page, p *plan.Plan) {
	t.Helper()
	var got struct {
		ID       string `json:"id"`
		Pod      string `json:"pod"`
		Workload string `json:"workload"`
	}
	pg.eval(t, `(function () {
	  var rows = Array.from(document.querySelectorAll(".pod-row")).filter(function (r) { return r.offsetParent !== null; });
	  var r = rows.filter(function (r) { return r.dataset.wave; })[0] || rows[0];
	  return r ? { id: r.id, pod: r.dataset.pod, workload: r.closest("section.workload").id } : {};
	})()`, &got)
	if got.ID == "" {
		t.Fatal("no pod row shown to select")
	}
	row := fmt.Sprintf("document.getElementById(%q)", got.ID)
	// In the middle of the window, clear of the explain panel fixed at
	// the bottom, as a reader scrolls to a row before clicking it.
	var scrolled bool
	pg.eval(t, row+`.scrollIntoView({ block: "center" }) === undefined`, &scrolled)
	if err := chromedp.Do(pg.ctx, chromedp.Click(chromedp.JSPath(row))); err != nil {
		t.Fatalf("click pod row %s: %v", got.ID, err)
	}
	text, err := chromedp.Run(pg.ctx, chromedp.TextContent(chromedp.ID("explain-text")))
	if err != nil {
		t.Fatalf("read the explain of %s: %v", got.ID, err)
	}
	if !strings.Contains(text, got.Pod) {
		t.Errorf("explain after a click on %s does not name the pod:\n%s", got.ID, text)
	}
	for i := range p.Workloads {
		wp := &p.Workloads[i]
		if "workload/"+wp.Kind+"/"+wp.Namespace+"/"+wp.Name != got.Workload {
			continue
		}
		if w := waveOf(wp, got.Pod); w > 0 && !strings.Contains(text, fmt.Sprintf("wave:        %d of %d", w, len(wp.Waves))) {
			t.Errorf("explain after a click on %s does not say wave %d of %d:\n%s", got.ID, w, len(wp.Waves), text)
		}
	}
	var selected bool
	pg.eval(t, row+`.classList.contains("selected")`, &selected)
	if !selected {
		t.Errorf("pod row %s is not selected after a click", got.ID)
	}
	// The mouse over another row shows that row's explain; keyboard focus
	// (Tab) on a row selects it.
	var other struct {
		ID  string  `json:"id"`
		Pod string  `json:"pod"`
		X   float64 `json:"x"`
		Y   float64 `json:"y"`
	}
	// The row is scrolled to the middle, then the mouse moved over its name.
	pg.eval(t, `(function () {
	  var rows = Array.from(document.querySelectorAll(".pod-row")).filter(function (r) { return r.offsetParent !== null && !r.classList.contains("selected"); });
	  var r = rows[rows.length - 1];
	  if (!r) return {};
	  r.scrollIntoView({ block: "center" });
	  var b = r.querySelector(".label").getBoundingClientRect();
	  return { id: r.id, pod: r.dataset.pod, x: b.left + b.width / 2, y: b.top + b.height / 2 };
	})()`, &other)
	if other.ID == "" {
		return // a page of one pod
	}
	if err := chromedp.Do(pg.ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, other.X, other.Y)); err != nil {
		t.Fatalf("move the mouse over %s: %v", other.ID, err)
	}
	if text, err = chromedp.Run(pg.ctx, chromedp.TextContent(chromedp.ID("explain-text"))); err != nil || !strings.Contains(text, other.Pod) {
		t.Errorf("explain with the mouse over %s (err %v) does not name the pod:\n%s", other.ID, err, text)
	}
	other2 := fmt.Sprintf("document.getElementById(%q)", other.ID)
	if err := chromedp.Do(pg.ctx, chromedp.Focus(chromedp.JSPath(other2))); err != nil {
		t.Fatalf("focus %s: %v", other.ID, err)
	}
	pg.eval(t, other2+`.classList.contains("selected") && !`+row+`.classList.contains("selected")`, &selected)
	if !selected {
		t.Errorf("pod row %s is not the one selected after it gets the keyboard focus", other.ID)
	}
}

// followAnchor opens the page at the anchor of its last pod row (in a
// collapsed group on a big page) and checks that the row is shown,
// selected and explained.
func followAnchor(t *testing.T, bctx context.Context, file string, first *page) {
	t.Helper()
	var id, pod string
	first.eval(t, `Array.from(document.querySelectorAll(".pod-row")).pop().id`, &id)
	first.eval(t, `Array.from(document.querySelectorAll(".pod-row")).pop().dataset.pod`, &pod)
	pg := openPage(t, bctx, file, id)
	var got struct {
		Shown    bool   `json:"shown"`
		Selected bool   `json:"selected"`
		Text     string `json:"text"`
	}
	pg.eval(t, fmt.Sprintf(`(function () { var r = document.getElementById(%q);
	  return { shown: r.offsetParent !== null, selected: r.classList.contains("selected"), text: document.getElementById("explain-text").textContent }; })()`, id), &got)
	if !got.Shown || !got.Selected || !strings.Contains(got.Text, pod) {
		t.Errorf("page opened at #%s: row shown %t, selected %t, explain:\n%s", id, got.Shown, got.Selected, got.Text)
	}
	pg.noErrors(t)
}

// waveOf is the wave whose action names pod, 0 for none.
func waveOf(wp *plan.WorkloadPlan, pod string) int {
	for _, w := range wp.Waves {
		for _, a := range w.Actions {
			if a.Pod == pod {
				return w.Index
			}
		}
	}
	return 0
}
