// The transcript viewer: "show all" on folded blocks, and a search over the turns that marks
// every match (text nodes are split and wrapped in <mark> through the DOM, never innerHTML, so
// the page's escaping stays intact), unfolds the blocks holding them and steps through them.
(function () {
  "use strict";
  function unfold(pre) {
    pre.classList.add("open");
    var button = pre.nextElementSibling;
    if (button && button.classList.contains("show-all")) { button.textContent = "fold"; }
  }

  // Every transcript of the page (two on the side-by-side view): "show all" / "fold".
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.show-all");
    if (!button) { return; }
    var pre = button.previousElementSibling;
    if (pre.classList.contains("open")) {
      pre.classList.remove("open");
      button.textContent = "show all";
    } else {
      unfold(pre);
    }
  });

  var root = document.getElementById("transcript");
  if (!root) { return; }
  var turns = document.getElementById("transcript-turns");
  var input = document.getElementById("transcript-search");
  var only = document.getElementById("transcript-only");
  var counter = document.getElementById("transcript-hits");
  var MAX_HITS = 5000;
  var hits = [];
  var current = -1;
  var timer = null;
  var turnsMatched = 0;
  // The query (and filter) the marks were made for: Enter steps through them only while the
  // box still says that; a query typed since (its debounced search not run yet) runs first.
  var searched = null;

  document.getElementById("transcript-expand").addEventListener("click", function () {
    root.querySelectorAll("pre.folded").forEach(unfold);
    root.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });

  function clear() {
    hits.forEach(function (mark) {
      var parent = mark.parentNode;
      if (!parent) { return; }
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    });
    hits = [];
    current = -1;
    turns.querySelectorAll(".turn.hidden").forEach(function (t) { t.classList.remove("hidden"); });
  }

  function search() {
    clear();
    var query = input.value.trim().toLowerCase();
    searched = query + "\n" + only.checked;
    if (query.length < 2) { counter.textContent = ""; return; }
    var walker = document.createTreeWalker(turns, NodeFilter.SHOW_TEXT);
    var nodes = [];
    for (var node = walker.nextNode(); node; node = walker.nextNode()) { nodes.push(node); }
    var matched = new Set();
    for (var i = 0; i < nodes.length && hits.length < MAX_HITS; i++) {
      var text = nodes[i];
      var lower = text.data.toLowerCase();
      var at = lower.indexOf(query);
      while (at !== -1 && hits.length < MAX_HITS) {
        var rest = text.splitText(at);
        text = rest.splitText(query.length);
        var mark = document.createElement("mark");
        mark.className = "hit";
        rest.parentNode.replaceChild(mark, rest);
        mark.appendChild(rest);
        hits.push(mark);
        var pre = mark.closest("pre.folded");
        if (pre) { unfold(pre); }
        var details = mark.closest("details");
        if (details) { details.open = true; }
        matched.add(mark.closest(".turn"));
        lower = text.data.toLowerCase();
        at = lower.indexOf(query);
      }
    }
    if (only.checked) {
      turns.querySelectorAll(".turn").forEach(function (t) {
        if (!matched.has(t)) { t.classList.add("hidden"); }
      });
    }
    turnsMatched = matched.size;
    if (hits.length) { step(1); } else { counter.textContent = "no match"; }
  }

  function step(delta) {
    if (!hits.length) { return; }
    if (current >= 0) { hits[current].classList.remove("current"); }
    current = (current + delta + hits.length) % hits.length;
    var mark = hits[current];
    mark.classList.add("current");
    mark.scrollIntoView({ block: "center" });
    counter.textContent = (current + 1) + " of " + hits.length + (hits.length >= MAX_HITS ? "+" : "") +
      " matches (" + turnsMatched + " turn" + (turnsMatched === 1 ? "" : "s") + ")";
  }

  input.addEventListener("input", function () {
    window.clearTimeout(timer);
    timer = window.setTimeout(search, 200);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter") {
      event.preventDefault();
      window.clearTimeout(timer);
      var now = input.value.trim().toLowerCase() + "\n" + only.checked;
      if (!hits.length || now !== searched) { search(); } else { step(event.shiftKey ? -1 : 1); }
    }
  });
  only.addEventListener("change", search);
  root.querySelectorAll("[data-step]").forEach(function (button) {
    button.addEventListener("click", function () { step(parseInt(button.dataset.step, 10)); });
  });
})();
