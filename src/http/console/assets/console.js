// tracklane console: live updates for elements marked data-live. Every few seconds the
// element's fragment is fetched again (same origin, the session cookie) and swapped in.
// Without JavaScript the pages work the same; they just do not move by themselves.
"use strict";
(function () {
  const EVERY_MS = 5000;
  async function refresh(el) {
    if (document.hidden) return;
    try {
      const res = await fetch(el.dataset.live, { headers: { accept: "text/html" }, credentials: "same-origin", cache: "no-store" });
      if (res.redirected || !res.ok) return; // signed out or failing: leave the page as it is
      const text = await res.text();
      if (text !== el.dataset.liveLast) {
        el.dataset.liveLast = text;
        el.innerHTML = text;
      }
    } catch {
      // offline for a moment: the next tick tries again
    }
  }
  for (const el of document.querySelectorAll("[data-live]")) {
    setInterval(() => refresh(el), EVERY_MS);
  }
})();
