/* semboard: sortable tables, deadline countdowns and upload progress; the pages work without
   this file. */
(function () {
  "use strict";

  // Words in the page's language: the page embeds its scripts' catalogue as JSON (the strings
  // of this file and charts.js, extracted by pybabel); without one, the English msgids.
  var catalogue = (function () {
    var node = document.getElementById("semboard-i18n");
    try { return node ? JSON.parse(node.textContent) : {}; } catch (e) { return {}; }
  })();
  var pluralRules = window.Intl && window.Intl.PluralRules ?
    new window.Intl.PluralRules(document.documentElement.lang || "en") : null;

  function fill(text, values) {
    return text.replace(/%(\((\w+)\)[sd]|%)/g, function (match, spec, name) {
      if (spec === "%") { return "%"; }
      return values && Object.prototype.hasOwnProperty.call(values, name) ?
        String(values[name]) : match;
    });
  }

  function gettext(msgid, values) {
    var text = catalogue[msgid];
    return fill(typeof text === "string" ? text : msgid, values);
  }

  function ngettext(singular, plural, n, values) {
    var forms = catalogue[singular];
    var text = n === 1 ? singular : plural;
    if (forms && typeof forms === "object" && pluralRules) {
      text = forms[pluralRules.select(n)] || forms.other || text;
    }
    var all = { num: n };
    Object.keys(values || {}).forEach(function (k) { all[k] = values[k]; });
    return fill(text, all);
  }

  // charts.js says its words through these
  window.semboardI18n = { gettext: gettext, ngettext: ngettext };

  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) { return null; }
    var raw = cell.getAttribute("data-sort-value");
    if (raw === null) { raw = cell.textContent.trim(); }
    return raw;
  }

  function compare(a, b, numeric) {
    // Empty / undefined values sort last whichever way the column goes.
    var aEmpty = a === null || a === "" || a === "—";
    var bEmpty = b === null || b === "" || b === "—";
    if (aEmpty || bEmpty) { return aEmpty === bEmpty ? 0 : (aEmpty ? 1 : -1); }
    if (numeric) { return parseFloat(a) - parseFloat(b); }
    return a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });
  }

  function sortTable(table, th) {
    var headerRow = th.parentNode;
    var index = Array.prototype.indexOf.call(headerRow.cells, th);
    var numeric = th.getAttribute("data-sort") === "number";
    var current = th.getAttribute("aria-sort");
    // Numbers start high-to-low (scores), ranks and text low-to-high.
    var first = th.getAttribute("data-sort-first") || (numeric ? "descending" : "ascending");
    var next = current === null || current === "none" ? first :
      (current === "ascending" ? "descending" : "ascending");
    Array.prototype.forEach.call(headerRow.cells, function (cell) {
      if (cell.hasAttribute("data-sort")) { cell.setAttribute("aria-sort", "none"); }
    });
    th.setAttribute("aria-sort", next);
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var sign = next === "ascending" ? 1 : -1;
    rows.sort(function (r1, r2) {
      var a = cellValue(r1, index), b = cellValue(r2, index);
      var aEmpty = a === null || a === "" || a === "—";
      var bEmpty = b === null || b === "" || b === "—";
      if (aEmpty || bEmpty) { return compare(a, b, numeric); }
      return sign * compare(a, b, numeric);
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function initSortable(table) {
    var headers = table.querySelectorAll("thead th[data-sort]");
    Array.prototype.forEach.call(headers, function (th) {
      var label = th.innerHTML;
      th.innerHTML = "";
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.innerHTML = label + '<span class="arrow" aria-hidden="true"></span>';
      button.addEventListener("click", function () { sortTable(table, th); });
      th.appendChild(button);
      if (!th.hasAttribute("aria-sort")) { th.setAttribute("aria-sort", "none"); }
    });
  }

  function describe(ms) {
    var s = Math.floor(Math.abs(ms) / 1000);
    var d = Math.floor(s / 86400); s -= d * 86400;
    var h = Math.floor(s / 3600); s -= h * 3600;
    var m = Math.floor(s / 60); s -= m * 60;
    var parts = [];
    if (d) { parts.push(ngettext("%(num)d day", "%(num)d days", d)); }
    if (d || h) { parts.push(ngettext("%(num)d hour", "%(num)d hours", h)); }
    if (!d) { parts.push(ngettext("%(num)d minute", "%(num)d minutes", m)); }
    if (!d && !h) { parts.push(ngettext("%(num)d second", "%(num)d seconds", s)); }
    return parts.join(" ");
  }

  // The server's clock decides deadlines: count from its time, not the visitor's.
  var offset = 0;

  function tick(nodes) {
    var now = Date.now() + offset;
    nodes.forEach(function (node) {
      var target = Date.parse(node.getAttribute("data-countdown"));
      if (isNaN(target)) { return; }
      var diff = target - now;
      node.textContent = diff >= 0 ? gettext("in %(time)s", { time: describe(diff) }) :
        gettext("%(time)s ago", { time: describe(diff) });
      node.setAttribute("data-live", "1");
    });
  }

  // Board breakdowns: show one breakdown's per-group columns; the server renders the same
  // choice from ?breakdown= (the form works without this), here it switches in place.
  function showBreakdown(name) {
    var cells = document.querySelectorAll("#leaderboard [data-breakdown]");
    Array.prototype.forEach.call(cells, function (cell) {
      cell.hidden = cell.getAttribute("data-breakdown") !== name;
    });
    var url = new URL(window.location.href);
    url.searchParams.set("breakdown", name);
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", url.toString());
    }
    // pages, searches and the contrastive runs' filter keep the choice
    var links = document.querySelectorAll(".pager a[href], #contrastive-toggle a[href]");
    Array.prototype.forEach.call(links, function (a) {
      var target = new URL(a.href);
      target.searchParams.set("breakdown", name);
      a.href = target.toString();
    });
    Array.prototype.forEach.call(document.querySelectorAll("form.board-search"), function (f) {
      var input = f.querySelector("input[name=breakdown]");
      if (!input) {
        input = document.createElement("input");
        input.type = "hidden";
        input.name = "breakdown";
        f.appendChild(input);
      }
      input.value = name;
    });
  }

  function initBreakdown(form) {
    var select = form.querySelector("select[name=breakdown]");
    if (!select) { return; }
    var button = form.querySelector("button[type=submit]");
    if (button) { button.hidden = true; }
    select.addEventListener("change", function () { showBreakdown(select.value); });
  }

  // Forms that undo nothing ask first (no inline handlers: the pages run under a strict CSP).
  document.addEventListener("submit", function (event) {
    var message = event.target.getAttribute && event.target.getAttribute("data-confirm");
    if (message && !window.confirm(message)) { event.preventDefault(); }
  });

  function megabytes(n) { return gettext("%(size)s MB", { size: (n / 1e6).toFixed(1) }); }

  function uploading(sent, total) {
    return gettext("Uploading… %(percent)s%% (%(sent)s of %(total)s)", {
      percent: Math.floor(100 * sent / total), sent: megabytes(sent), total: megabytes(total) });
  }

  // Upload forms (data-upload-progress) send their files with a progress bar: a model may take
  // minutes. The answer (the page a redirect leads to, or the form with every problem) then
  // replaces this page, so its messages show as after a plain submit.
  function uploadWithProgress(form, event) {
    if (event.defaultPrevented || !window.FormData || !window.XMLHttpRequest) { return; }
    var files = form.querySelector("input[type=file]");
    if (!files || !files.files || !files.files.length) { return; }
    event.preventDefault();
    var button = form.querySelector("[type=submit]");
    var box = progressBox(form);
    var bar = box.querySelector("progress");
    var label = box.querySelector("span");
    label.textContent = gettext("Uploading…");
    if (button) { button.disabled = true; }
    var target = form.getAttribute("action") || window.location.href;
    var xhr = new XMLHttpRequest();
    xhr.open("POST", target);
    xhr.upload.addEventListener("progress", function (e) {
      if (!e.lengthComputable) { return; }
      bar.max = e.total;
      bar.value = e.loaded;
      label.textContent = uploading(e.loaded, e.total);
      if (e.loaded >= e.total) { label.textContent = gettext("Uploaded; the site is checking it…"); }
    });
    xhr.addEventListener("load", function () {
      var landed = xhr.responseURL || target;
      document.open();
      document.write(xhr.responseText);
      document.close();
      if (landed !== target && window.history && window.history.replaceState) {
        window.history.replaceState(null, "", landed);
      }
    });
    xhr.addEventListener("error", function () {
      label.textContent = gettext("The upload failed (the connection was lost). Nothing was " +
        "stored; try again.");
      if (button) { button.disabled = false; }
    });
    xhr.send(new FormData(form));
  }

  function progressBox(form) {
    var box = form.querySelector(".upload-progress");
    if (!box) {
      box = document.createElement("div");
      box.className = "upload-progress";
      box.setAttribute("role", "status");
      box.setAttribute("aria-live", "polite");
      box.innerHTML = '<progress max="1" value="0"></progress> <span class="small"></span>' +
        '<ul class="small upload-problems"></ul>';
      form.appendChild(box);
    }
    box.querySelector(".upload-problems").innerHTML = "";
    return box;
  }

  // One request of the upload in parts; calls back with (status, JSON answer or null).
  function send(method, url, body, headers, onProgress, done) {
    var xhr = new XMLHttpRequest();
    xhr.open(method, url);
    xhr.setRequestHeader("Accept", "application/json");
    Object.keys(headers).forEach(function (k) { xhr.setRequestHeader(k, headers[k]); });
    if (onProgress) { xhr.upload.addEventListener("progress", onProgress); }
    xhr.addEventListener("load", function () {
      var answer = null;
      try { answer = JSON.parse(xhr.responseText); } catch (e) { answer = null; }
      done(xhr.status, answer);
    });
    xhr.addEventListener("error", function () { done(0, null); });
    xhr.send(body);
  }

  // A model (possibly gigabytes) goes in parts, as `semboard submit-model` sends it: each part
  // is a short request, a broken one is sent again from where the site says the upload stands.
  function uploadModelInParts(form, event) {
    if (event.defaultPrevented || !window.FormData || !window.XMLHttpRequest ||
        !window.Blob || !Blob.prototype.slice) { return; }
    var input = form.querySelector("input[type=file]");
    if (!input || !input.files || !input.files.length) { return; }
    event.preventDefault();
    var file = input.files[0];
    var button = form.querySelector("[type=submit]");
    var box = progressBox(form);
    var bar = box.querySelector("progress");
    var label = box.querySelector("span");
    var token = (form.querySelector("input[name=csrf_token]") || {}).value || "";
    var headers = { "X-CSRFToken": token };
    var failures = 0;
    if (button) { button.disabled = true; }

    function fail(answer, fallback) {
      label.textContent = (answer && answer.error) || fallback;
      var list = box.querySelector(".upload-problems");
      ((answer && answer.issues) || []).forEach(function (issue) {
        var item = document.createElement("li");
        item.textContent = [issue.file, issue.line, issue.message].filter(function (part) {
          return part !== null && part !== undefined && part !== "";
        }).join(": ");
        list.appendChild(item);
      });
      if (button) { button.disabled = false; }
    }

    function show(sent) {
      bar.max = file.size;
      bar.value = sent;
      label.textContent = uploading(sent, file.size);
    }

    var fields = new FormData(form);
    fields.delete(input.name);
    fields.append("size", String(file.size));
    fields.append("filename", file.name);
    label.textContent = gettext("Starting the upload…");
    send("POST", form.getAttribute("data-model-parts"), fields, headers, null,
      function (status, upload) {
        if (status !== 201 || !upload) {
          fail(upload, gettext("The upload could not start (HTTP %(status)s).", { status: status }));
          return;
        }
        next(upload);
      });

    function next(upload) {
      var offset = upload.next_offset;
      if (offset >= file.size) { finish(upload); return; }
      var end = Math.min(file.size, offset + upload.part_bytes);
      var partHeaders = { "X-CSRFToken": token, "Content-Type": "application/octet-stream",
        "Content-Range": "bytes " + offset + "-" + (end - 1) + "/" + file.size };
      send("PUT", upload.upload_url, file.slice(offset, end), partHeaders, function (e) {
        show(offset + e.loaded);
      }, function (status, answer) {
        if (status === 200 && answer) { failures = 0; next(answer); return; }
        if ((status === 0 || status === 409 || status >= 500) && failures < 5) {
          failures += 1;  // ask where the upload stands, go on from there
          window.setTimeout(function () {
            send("GET", upload.upload_url, null, {}, null, function (s, state) {
              if (s === 200 && state) { next(state); } else { fail(state, gettext("The upload broke off; try again.")); }
            });
          }, 1000 * failures);
          return;
        }
        fail(answer, gettext("The upload broke off (HTTP %(status)s); try again.", { status: status }));
      });
    }

    function finish(upload) {
      show(file.size);
      label.textContent = gettext("Uploaded; the site is checking the model…");
      send("POST", upload.finish_url, null, headers, null, function (status, answer) {
        if (status === 202 && answer && answer.redirect) {
          window.location.assign(answer.redirect);
          return;
        }
        fail(answer, gettext("The model was refused (HTTP %(status)s).", { status: status }));
      });
    }
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.hasAttribute && form.hasAttribute("data-model-parts")) {
      uploadModelInParts(form, event);
    }
    if (form.hasAttribute && form.hasAttribute("data-upload-progress")) {
      uploadWithProgress(form, event);
    }
  });

  // The run column sticks beside the team column: its offset is the team column's width.
  function stickyColumns() {
    var board = document.getElementById("leaderboard");
    var first = board && board.querySelector("thead th");
    if (first) {
      board.style.removeProperty("--team-width");  // measured afresh (a phone's CSS sets it)
      board.style.setProperty("--team-width", first.getBoundingClientRect().width + "px");
    }
  }

  window.addEventListener("resize", stickyColumns);

  document.addEventListener("DOMContentLoaded", function () {
    stickyColumns();
    Array.prototype.forEach.call(document.querySelectorAll("table[data-sortable]"), initSortable);
    Array.prototype.forEach.call(document.querySelectorAll("form[data-breakdown-form]"),
      initBreakdown);
    var nodes = Array.prototype.slice.call(document.querySelectorAll("[data-countdown]"));
    var serverNow = Date.parse(document.body.getAttribute("data-now") || "");
    if (!isNaN(serverNow)) { offset = serverNow - Date.now(); }
    if (nodes.length) {
      tick(nodes);
      window.setInterval(function () { tick(nodes); }, 1000);
    }
  });
})();
