// A task's image pull, live: polls its JSON endpoint until the pull ends. Text goes in by
// textContent only (never as HTML), so a reference or a registry's words stay plain text.
(function () {
  "use strict";
  var box = document.getElementById("image-progress");
  if (!box) { return; }
  var line = box.querySelector("[data-field='line']");
  function tick() {
    if (box.dataset.final === "1") { return; }
    fetch(box.dataset.imageProgress, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (p) {
        line.textContent = p.line || "";
        var bar = box.querySelector("progress");
        if (bar && p.bytes_total) { bar.max = p.bytes_total; bar.value = p.bytes_done || 0; }
        box.dataset.final = p.final ? "1" : "0";
      })
      .catch(function () {})
      .then(function () { window.setTimeout(tick, 2000); });
  }
  window.setTimeout(tick, 2000);
})();
