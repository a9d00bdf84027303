// Draws a page's charts lazily: when a chart [data-chart-src] comes near the viewport, plotly.js
// (data-plotly, 4.8 MB) and the chart data (JSON from data-chart-src) are fetched, each once
// for the whole page, then the chart is drawn. A bar segment with a URL in customdata opens it.
(function () {
  "use strict";
  var pending = {};  // url -> Promise, so two charts of one URL share one request

  function once(url, make) {
    if (!pending[url]) { pending[url] = make(url); }
    return pending[url];
  }

  function loadScript(url) {
    return new Promise(function (resolve, reject) {
      if (window.Plotly) { resolve(); return; }
      var script = document.createElement("script");
      script.src = url;
      script.async = true;
      script.onload = function () { resolve(); };
      script.onerror = function () { reject(new Error("could not load " + url)); };
      document.head.appendChild(script);
    });
  }

  function fetchJson(url) {
    return fetch(url, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status + " for " + url));
    });
  }

  function load(el) {
    Promise.all([once(el.dataset.plotly, loadScript), once(el.dataset.chartSrc, fetchJson)])
      .then(function (results) { draw(el, results[1]); })
      .catch(function (error) {
        el.textContent = "The chart could not be loaded: " + error.message;
      });
  }

  function draw(el, data) {
    el.textContent = "";
    var kind = el.dataset.kind;
    var traces = kind === "lines" ? data.lines : data.bars;
    var layout = {
      margin: { l: 60, r: 20, t: 20, b: kind === "lines" ? 50 : 120 },
      font: { family: "system-ui, -apple-system, Segoe UI, sans-serif", size: 12 },
      legend: { orientation: "v" },
      hovermode: "closest",
    };
    if (kind === "lines") {
      layout.yaxis = { title: { text: "resolved %" }, range: [0, 105] };
      layout.xaxis = { type: "date" };
    } else {
      layout.barmode = "stack";
      layout.yaxis = { title: { text: "attempts" } };
      layout.xaxis = { automargin: true };
    }
    Plotly.newPlot(el, traces, layout, { displaylogo: false, responsive: true });
    el.on("plotly_click", function (event) {
      var point = event.points && event.points[0];
      var url = point && point.customdata;
      // Only same-site relative URLs built by the server.
      if (typeof url === "string" && url.charAt(0) === "/" && url.charAt(1) !== "/") {
        window.location.href = url;
      }
    });
  }
  var charts = document.querySelectorAll("[data-chart-src]");
  if (!("IntersectionObserver" in window)) { charts.forEach(load); return; }
  var observer = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) { observer.unobserve(entry.target); load(entry.target); }
    });
  }, { rootMargin: "200px" });
  charts.forEach(function (el) { observer.observe(el); });
})();
