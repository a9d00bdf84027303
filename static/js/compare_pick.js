(function () {
  // The order of clicks is the order of the columns (the first is the reference).
  var form = document.getElementById("compare-pick");
  if (!form) { return; }
  var order = form.dataset.selected ? form.dataset.selected.split(",") : [];
  var shown = document.getElementById("pick-order");
  function render() {
    form.models.value = order.join(",");
    shown.textContent = order.length ? "Order: " + order.join(" → ") : "";
  }
  form.querySelectorAll("input[type=checkbox]").forEach(function (box) {
    box.addEventListener("change", function () {
      order = order.filter(function (k) { return k !== box.value; });
      if (box.checked) { order.push(box.value); }
      render();
    });
  });
  render();
})();
