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

  // "Show earlier": the server's rows before the oldest one shown take the control's place (the
  // fragment ends with a new control while older ones remain). Done here rather than by htmx,
  // whose swap of a hundred rows took several times as long as fetching them; without scripts the
  // link opens the page with every event.
  function showEarlier(timeline) {
    timeline.addEventListener("click", function (event) {
      var link = event.target.closest("#show-earlier");
      if (!link || !link.dataset.rows) { return; }
      event.preventDefault();
      if (link.dataset.loading) { return; }
      link.dataset.loading = "1";
      fetch(link.dataset.rows, { credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) { throw new Error("status " + response.status); }
          return response.text();
        })
        .then(function (html) {
          var rows = document.createElement("template");
          rows.innerHTML = html;
          link.closest("li").replaceWith(rows.content);
        })
        .catch(function () { window.location.href = link.href; });
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
    if (timeline) { showEarlier(timeline); }
    if (timeline && timeline.dataset.stream) { followTask(timeline); }
    var rows = document.getElementById("task-rows");
    if (rows && rows.dataset.stream) { followList(rows); }
  });
})();
