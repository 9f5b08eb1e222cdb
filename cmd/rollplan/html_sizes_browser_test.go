package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// The page at the size a reader opens it (1400×1000) with a real
// Deployment's pod names (issue 33): rows stay told apart by the names'
// distinguishing suffix, the last wave is a bar one can see and point at,
// the explain panel covers no row once the page is scrolled to the end,
// and the legend leaves the first screen to the plan.
func TestHTMLAtRealSizes(t *testing.T) {
	bctx := browser(t)
	dir := t.TempDir()
	base, err := os.ReadFile("testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// payments-gateway-frontend-647569c96f-s7hx2: 42 characters, as
	// long as many a production Deployment's pods.
	snap := regexp.MustCompile(`\bapi\b`).ReplaceAll(base, []byte("payments-gateway-frontend"))
	snapFile := filepath.Join(dir, "long-names.yaml")
	if err := os.WriteFile(snapFile, snap, 0o644); err != nil {
		t.Fatal(err)
	}
	html, stderr, err := run(t, append([]string{"plan", "-f", snapFile, "-o", "html"}, scenarioArgs(t, "testdata/scenarios/deploy-rolling-10-25pct")...)...)
	if err != nil {
		t.Fatalf("plan -o html: %v\n%s", err, stderr)
	}
	file := filepath.Join(dir, "long-names.html")
	if err := os.WriteFile(file, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	pg := openPage(t, bctx, file, "")
	var got struct {
		Rows        int      `json:"rows"`
		CutSuffixes []string `json:"cutSuffixes"`
		LastWaveW   float64  `json:"lastWaveWidth"`
		LegendH     float64  `json:"legendHeight"`
		ViewportH   float64  `json:"viewportHeight"`
		LastRowBot  float64  `json:"lastRowBottom"`
		PanelTop    float64  `json:"panelTop"`
		PanelText   int      `json:"panelText"`
	}
	pg.eval(t, `(function () {
  var rows = Array.from(document.querySelectorAll(".pod-row"));
  // A name's last 5 characters must be drawn inside its label: a cut at
  // the end leaves every row of one ReplicaSet reading the same.
  var cut = rows.filter(function (row) {
    var label = row.querySelector(".label");
    var walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    var last = null;
    while (walker.nextNode()) { if (walker.currentNode.textContent.trim() !== "") { last = walker.currentNode; } }
    if (!last) { return true; }
    var range = document.createRange();
    var n = last.textContent.length;
    range.setStart(last, Math.max(0, n - 5));
    range.setEnd(last, n);
    var r = range.getBoundingClientRect(), box = label.getBoundingClientRect();
    return r.width === 0 || r.right > box.right + 0.5;
  }).map(function (row) { return row.dataset.pod; });
  var bars = document.querySelectorAll(".timeline .wave-bar rect");
  var lastBar = bars[bars.length - 1].getBoundingClientRect();
  // The last pod selected (the panel at its fullest), then the page
  // scrolled to its end.
  rows[rows.length - 1].click();
  return {rows: rows.length, cutSuffixes: cut, lastWaveWidth: lastBar.width,
    legendHeight: document.querySelector(".legend").getBoundingClientRect().height, viewportHeight: window.innerHeight};
})()`, &got)
	// A frame later (the page lays itself out for the panel's new size).
	time.Sleep(200 * time.Millisecond)
	pg.eval(t, `(function () {
  var rows = document.querySelectorAll(".pod-row");
  window.scrollTo(0, document.documentElement.scrollHeight);
  return {lastRowBottom: rows[rows.length - 1].getBoundingClientRect().bottom,
    panelTop: document.getElementById("explain").getBoundingClientRect().top,
    panelText: document.getElementById("explain-text").textContent.length};
})()`, &got)
	pg.screenshot(t, "long-names")
	if got.Rows != 10 {
		t.Fatalf("%d pod rows, want 10", got.Rows)
	}
	if len(got.CutSuffixes) > 0 {
		t.Errorf("pod rows %q show no distinguishing suffix: the end of the name is cut", got.CutSuffixes)
	}
	if got.LastWaveW < 24 {
		t.Errorf("the last wave's bar is %.1fpx wide, want one you can see and point at (>= 24px)", got.LastWaveW)
	}
	if got.LegendH > got.ViewportH/10 {
		t.Errorf("the legend is %.0fpx of a %.0fpx screen, want at most a tenth", got.LegendH, got.ViewportH)
	}
	if got.PanelText < 200 {
		t.Errorf("the explain panel holds %d characters after selecting a pod", got.PanelText)
	}
	t.Logf("last row ends at %.1fpx, panel from %.1fpx", got.LastRowBot, got.PanelTop)
	if got.LastRowBot > got.PanelTop {
		t.Errorf("scrolled to the end, the last pod row ends at %.0fpx, under the explain panel from %.0fpx", got.LastRowBot, got.PanelTop)
	}
	pg.noErrors(t)
}
