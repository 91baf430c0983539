// codeloop console: follow the server's event streams (Server-Sent Events) and put the rows the
// server rendered into the page; htmx does the forms and the panel refreshes. Nothing here
// builds markup from data: every fragment comes rendered and escaped from the server.
(function () {
  "use strict";

  function fragment(html, container) {
    var holder = document.createElement(container);
    holder.innerHTML = html.trim();
    return holder.firstElementChild;
  }

  function followTask(timeline) {
    var live = document.getElementById("live-state");
    var timer = null;
    function state(name) { if (live) { live.dataset.state = name; live.textContent = name; } }
    function refreshPanel() {
      if (timer !== null || !window.htmx) { return; }
      timer = window.setTimeout(function () {
        timer = null;
        window.htmx.ajax("GET", timeline.dataset.panel, { target: "#task-panel", swap: "outerHTML" });
      }, 100);
    }
    var source = new EventSource(timeline.dataset.stream);
    source.addEventListener("open", function () { state("live"); });
    source.addEventListener("error", function () {
      if (source.readyState !== EventSource.CLOSED) { state("reconnecting"); }
    });
    source.addEventListener("row", function (event) {
      var row = fragment(event.data, "ol");
      if (!row) { return; }
      timeline.appendChild(row);
      if (row.dataset.refresh) { refreshPanel(); }
    });
    source.addEventListener("end", function () {
      source.close();
      state("ended");
      refreshPanel();
    });
  }

  function followList(rows) {
    var source = new EventSource(rows.dataset.stream);
    source.addEventListener("task", function (event) {
      var row = fragment(event.data, "tbody");
      if (!row) { return; }
      var old = document.getElementById(row.id);
      if (old) { old.replaceWith(row); } else { rows.prepend(row); }
      var empty = document.getElementById("no-tasks");
      if (empty) { empty.remove(); }
    });
    source.addEventListener("gone", function (event) {
      var old = document.getElementById("task-" + event.data);
      if (old) { old.remove(); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var timeline = document.getElementById("timeline");
    if (timeline && timeline.dataset.stream) { followTask(timeline); }
    var rows = document.getElementById("task-rows");
    if (rows && rows.dataset.stream) { followList(rows); }
  });
})();
