// rollplan plan -o html: select a pod to see its explain, expand and
// collapse zone and node groups, follow #pod/NAMESPACE/NAME anchors.
(function () {
  "use strict";
  // explain-data: {"lines": [...], "pods": {"pod/NS/NAME": [line indexes]}}
  var data = JSON.parse(document.getElementById("explain-data").textContent);
  var text = document.getElementById("explain-text");
  var selected = null;

  function show(row) {
    var idx = data.pods[row.id];
    text.textContent = idx === undefined ? row.id : idx.map(function (i) { return data.lines[i]; }).join("\n");
  }
  function select(row, updateHash) {
    if (selected) selected.classList.remove("selected");
    selected = row;
    row.classList.add("selected");
    row.setAttribute("aria-selected", "true");
    show(row);
    if (updateHash && history.replaceState) history.replaceState(null, "", "#" + row.id);
  }
  function setExpanded(groupRow, open) {
    groupRow.setAttribute("aria-expanded", open ? "true" : "false");
    var body = groupRow.nextElementSibling;
    if (body) body.hidden = !open;
  }
  function reveal(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.classList.contains("group-body") && p.hidden) setExpanded(p.previousElementSibling, true);
    }
  }
  function podRow(t) { return t && t.closest ? t.closest(".pod-row") : null; }
  function groupRow(t) { return t && t.closest ? t.closest(".group-row") : null; }

  document.addEventListener("mouseover", function (e) {
    var row = podRow(e.target);
    if (row) show(row);
  });
  document.addEventListener("mouseout", function (e) {
    var row = podRow(e.target);
    if (row && selected && !row.contains(e.relatedTarget)) show(selected);
  });
  document.addEventListener("click", function (e) {
    var row = podRow(e.target);
    if (row) { select(row, true); return; }
    var g = groupRow(e.target);
    if (g) setExpanded(g, g.getAttribute("aria-expanded") !== "true");
  });
  document.addEventListener("focusin", function (e) {
    var row = podRow(e.target);
    if (row) select(row, false);
  });
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Enter" && e.key !== " ") return;
    var g = groupRow(e.target);
    if (g && g === e.target) {
      e.preventDefault();
      setExpanded(g, g.getAttribute("aria-expanded") !== "true");
    }
  });

  // Space on a group row toggles it, and must not scroll the page too
  // (a key sent as keydown then char reaches the page as keypress).
  document.addEventListener("keypress", function (e) {
    var g = groupRow(e.target);
    if (e.key === " " && g && g === e.target) e.preventDefault();
  });

  function follow() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id) return;
    var el = document.getElementById(id);
    if (!el) return;
    reveal(el);
    if (el.classList.contains("pod-row")) {
      select(el, false);
      el.scrollIntoView({ block: "center" });
    } else if (el.classList.contains("wave-bar")) {
      var old = document.querySelectorAll(".wave-bar.hl");
      for (var i = 0; i < old.length; i++) old[i].classList.remove("hl");
      el.classList.add("hl");
      el.scrollIntoView({ block: "center" });
    }
  }
  window.addEventListener("hashchange", follow);
  follow();
  // The fixed explain panel must never hide the page's last rows: the
  // page ends with room for the panel as tall as it is now (fonts, zoom
  // and the selected pod's explain decide that, not the stylesheet).
  var panel = document.getElementById("explain");
  function room() { document.body.style.paddingBottom = (panel.offsetHeight + 16) + "px"; }
  if (window.ResizeObserver) new ResizeObserver(room).observe(panel);
  room();
})();
