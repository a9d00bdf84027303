// An attempt page's keyboard shortcuts: j the next attempt of the list, k the previous one,
// u back to the list (the links of #attempt-nav). Ignored while typing in a field.
(function () {
  "use strict";
  var keys = { j: "nav-next", k: "nav-prev", u: "nav-list" };
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    var target = event.target;
    var tag = target && target.tagName ? target.tagName.toLowerCase() : "";
    if (tag === "input" || tag === "textarea" || tag === "select" || (target && target.isContentEditable)) return;
    var id = keys[event.key];
    var link = id && document.getElementById(id);
    if (link && link.href) {
      event.preventDefault();
      window.location.href = link.href;
    }
  });
})();
