// decree dashboard: follows a running attempt's log. The page works
// without this file (reload to see more); with it, new output is appended
// as text (never parsed as HTML) while the page is open.
(function () {
  "use strict";
  function follow(pre) {
    var state = document.getElementById(pre.id + "-state");
    var src = new EventSource(pre.getAttribute("data-stream"));
    function say(text) { if (state) { state.textContent = text; } }
    src.addEventListener("open", function () { say("Following the log."); });
    src.addEventListener("log", function (e) {
      var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
      pre.appendChild(document.createTextNode(e.data));
      if (atBottom) { pre.scrollTop = pre.scrollHeight; }
    });
    src.addEventListener("end", function (e) {
      src.close();
      say(e.data + ".");
      pre.setAttribute("data-ended", "true");
    });
    src.addEventListener("error", function () {
      if (src.readyState === EventSource.CLOSED) { say("The log stream closed; reload the page to follow it again."); }
      else { say("Reconnecting to the log…"); }
    });
  }
  // The htmx SSE extension's connection state, on the element that holds
  // it (data-live="open" or "retrying"), so people and tests can see it.
  document.addEventListener("htmx:sseOpen", function (e) { e.target.setAttribute("data-live", "open"); });
  document.addEventListener("htmx:sseError", function (e) { e.target.setAttribute("data-live", "retrying"); });
  function init() {
    var logs = document.querySelectorAll("pre[data-stream]");
    for (var i = 0; i < logs.length; i++) { follow(logs[i]); }
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); } else { init(); }
})();
