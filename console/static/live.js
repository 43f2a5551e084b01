// Live updates of the console's pages (console/live.go). The page's event
// stream says "change" when what the page shows changed; the page then
// fetches itself again and swaps its #live-part for the new one. The
// stream carries no data: everything shown comes escaped in the page.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  var part = document.getElementById("live-part");
  var state = document.getElementById("live-state");
  var toggle = document.getElementById("live-toggle");
  if (!main || !part || !window.EventSource || !window.fetch) {
    return;
  }
  var es = null;
  var busy = false;
  var again = false;
  var updates = 0;

  function show(text) {
    if (state) {
      state.textContent = text;
    }
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) {
        if (r.redirected) { // the session ended: the login form
          location.assign(r.url);
          throw new Error("redirected");
        }
        if (!r.ok) {
          throw new Error("HTTP " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("live-part");
        if (next) {
          part.replaceWith(document.adoptNode(next));
          part = next;
          updates++;
          document.body.setAttribute("data-live-updates", String(updates));
          show("live, updated " + new Date().toLocaleTimeString());
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  function start() {
    es = new EventSource(main.getAttribute("data-live"));
    es.addEventListener("open", function () { show("live"); });
    es.addEventListener("change", refresh);
    es.addEventListener("end", function () {
      stop("ended: the task is terminal");
    });
    es.addEventListener("error", function () {
      if (es && es.readyState === EventSource.CLOSED) {
        stop("paused: the stream closed; reload the page");
      } else {
        show("reconnecting…");
      }
    });
    if (toggle) {
      toggle.textContent = "Pause live updates";
    }
  }

  function stop(why) {
    if (es) {
      es.close();
      es = null;
    }
    show(why);
    if (toggle) {
      toggle.textContent = "Resume live updates";
    }
  }

  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener("click", function () {
      if (es) {
        stop("paused");
      } else {
        start();
        refresh();
      }
    });
  }
  start();
})();
