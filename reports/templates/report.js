// dpuprof report script (inlined; allowed by its CSP hash). Click-to-zoom for the flame graphs.
// Frame names are read and written with textContent only, never parsed as HTML.
(function () {
  "use strict";
  var CHAR_PX = 6.6;
  function label(name, px) {
    var fit = Math.floor((px - 6) / CHAR_PX);
    if (fit < 3) { return ""; }
    return name.length <= fit ? name : name.slice(0, fit - 2) + "..";
  }
  function zoom(svg, target) {
    var W = parseFloat(svg.getAttribute("data-width"));
    var zx = parseFloat(target.getAttribute("data-x"));
    var zw = parseFloat(target.getAttribute("data-w"));
    var zd = parseInt(target.getAttribute("data-d"), 10);
    var frames = svg.querySelectorAll("g.fg");
    for (var i = 0; i < frames.length; i++) {
      var g = frames[i];
      var x = parseFloat(g.getAttribute("data-x"));
      var w = parseFloat(g.getAttribute("data-w"));
      var d = parseInt(g.getAttribute("data-d"), 10);
      var nx, nw, show;
      if (d < zd) {
        show = x <= zx + 1e-9 && x + w >= zx + zw - 1e-9;
        nx = 0; nw = W;
      } else {
        show = x >= zx - 1e-9 && x + w <= zx + zw + 1e-9;
        nx = (x - zx) / zw * W; nw = w / zw * W;
      }
      g.style.display = show ? "" : "none";
      if (!show) { continue; }
      var rect = g.querySelector("rect");
      var text = g.querySelector("text");
      var title = g.querySelector("title");
      rect.setAttribute("x", nx.toFixed(2));
      rect.setAttribute("width", Math.max(nw - 0.5, 0.1).toFixed(2));
      text.setAttribute("x", (nx + 3).toFixed(2));
      text.textContent = label(title.textContent.split("\n")[0], nw);
    }
  }
  var svgs = document.querySelectorAll("svg.flame");
  for (var s = 0; s < svgs.length; s++) {
    (function (svg) {
      svg.addEventListener("click", function (ev) {
        var g = ev.target.closest ? ev.target.closest("g.fg") : null;
        if (g) { zoom(svg, g); }
      });
    })(svgs[s]);
  }
  document.documentElement.setAttribute("data-dpuprof-ready", "1");
})();
