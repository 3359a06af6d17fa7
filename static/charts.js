/* semboard charts: renders the Vega-Lite specs the server built with vega-embed (vendored in
   static/vendor/), under the site's CSP: expressions go through vega-interpreter (no eval) and
   vega-embed injects no style sheet. Every chart has a text or table version beside it. */
(function () {
  "use strict";

  // The page's language, through static/semboard.js (English without it).
  function gettext(msgid, values) {
    var words = window.semboardI18n;
    return words ? words.gettext(msgid, values) : msgid.replace(/%\((\w+)\)s/g, function (m, k) {
      return values && k in values ? String(values[k]) : m;
    });
  }

  function embedOptions() {
    return {
      renderer: "svg",
      actions: false,
      ast: true,
      expr: window.vegaInterpreter.expressionInterpreter,
      defaultStyle: false,
      tooltip: false  // vega's own handler: a native title, no injected styles
    };
  }

  function save(url, filename) {
    var link = document.createElement("a");
    link.href = url;
    link.download = filename;
    document.body.appendChild(link);
    link.click();
    link.remove();
  }

  function wireDownloads(figure, view) {
    var name = figure.getAttribute("data-filename") || "chart";
    Array.prototype.forEach.call(figure.querySelectorAll("button[data-download]"), function (button) {
      var format = button.getAttribute("data-download");
      button.disabled = false;
      button.addEventListener("click", function () {
        view.toImageURL(format, format === "png" ? 2 : 1).then(function (url) {
          save(url, name + "." + format);
        });
      });
    });
  }

  function fail(figure, message) {
    figure.setAttribute("data-rendered", "error");
    var canvas = figure.querySelector(".chart-canvas");
    canvas.textContent = message;
  }

  function render(figure, spec) {
    var canvas = figure.querySelector(".chart-canvas");
    return window.vegaEmbed(canvas, spec, embedOptions()).then(function (result) {
      wireDownloads(figure, result.view);
      figure.setAttribute("data-rendered", "1");
    }).catch(function (err) {
      fail(figure, gettext("The chart could not be drawn (%(error)s); see the table version.",
        { error: err.message }));
    });
  }

  function load(figure) {
    var inline = figure.getAttribute("data-spec");
    if (inline) {
      render(figure, JSON.parse(document.getElementById(inline).textContent));
      return;
    }
    var url = figure.getAttribute("data-spec-url");
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (spec) { return render(figure, spec); })
      .catch(function (err) { fail(figure, gettext("No chart (%(error)s).", { error: err.message })); });
  }

  function init() {
    if (!window.vegaEmbed || !window.vegaInterpreter) { return; }
    Array.prototype.forEach.call(document.querySelectorAll("figure.chart"), load);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
