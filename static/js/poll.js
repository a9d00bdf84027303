// Live progress: re-fetches a server-rendered fragment until it says the run is final.
(function () {
  "use strict";
  var box = document.querySelector("[data-poll]");
  if (!box) { return; }
  var interval = parseInt(box.dataset.interval || "2000", 10);
  function tick() {
    if (box.querySelector("[data-final='1']")) { return; }
    fetch(box.dataset.poll, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { box.innerHTML = html; })  // our own escaped template output
      .catch(function () {})
      .then(function () { window.setTimeout(tick, interval); });
  }
  window.setTimeout(tick, interval);
})();
