// The dashboard's script, a progressive enhancement (the pages work without it): refresh
// figures in place, reload the charts, size the flow's progress bar, and ask before a
// form marked data-confirm is sent.  A file of its own, since the pages'
// Content-Security-Policy allows no inline script or event handler.
(function () {
  "use strict";

  // A bar's parts carry their share in data-share (percent): CSSOM sets the widths, as
  // the policy refuses style attributes in the markup.
  function sizeBars(root) {
    root.querySelectorAll(".bar[hidden]").forEach(function (bar) {
      bar.querySelectorAll("[data-share]").forEach(function (part) {
        part.style.width = part.dataset.share + "%";
      });
      bar.hidden = false;
    });
  }

  function refresh() {
    document.querySelectorAll("[data-refresh]").forEach(async function (el) {
      try {
        const r = await fetch(el.dataset.refresh, {credentials: "same-origin"});
        if (r.ok) {
          el.innerHTML = await r.text();
          sizeBars(el);
        }
      } catch (e) { /* the next tick tries again */ }
    });
  }

  function reload() {
    document.querySelectorAll("img[data-reload]").forEach(function (img) {
      const url = img.dataset.reload;
      img.src = url + (url.indexOf("?") < 0 ? "?" : "&") + "t=" + Date.now();
    });
  }

  // The button's data-confirm (a form's second action) wins over its form's.
  document.addEventListener("submit", function (event) {
    const by = event.submitter;
    const question = (by && by.dataset.confirm) || event.target.dataset.confirm;
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    sizeBars(document);
    const every = Number(document.body.dataset.refreshMs);
    if (every > 0) {
      setInterval(refresh, every);
    }
    setInterval(reload, 30000);
  });
})();
