// Draws the charts of a page from data the server put in <script type="application/json">
// (Django's json_script). A bar segment with a URL in customdata opens it on click.
(function () {
  "use strict";
  function draw(el) {
    var source = document.getElementById(el.dataset.chart);
    if (!source || !window.Plotly) { return; }
    var data = JSON.parse(source.textContent);
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
  document.querySelectorAll("[data-chart]").forEach(draw);
})();
