// tracklane console: live updates for elements marked data-live. Every few seconds the
// element's fragment is fetched again (same origin, the session cookie) and swapped in.
// Without JavaScript the pages work the same; they just do not move by themselves.
// A region is left alone while someone works in it: while the keyboard focus is inside
// (a swap would throw it back to the page's start) or text in it is selected. It is
// swapped once they leave: at once when the focus leaves, else on the next tick. The page
// keeps its scroll position across a swap.
"use strict";
(function () {
  const EVERY_MS = 5000;
  const inUse = (el) => {
    const sel = document.getSelection();
    return el.contains(document.activeElement) || (sel !== null && !sel.isCollapsed && el.contains(sel.anchorNode));
  };
  for (const el of document.querySelectorAll("[data-live]")) {
    let last = null;
    let fetching = false;
    const refresh = async () => {
      if (document.hidden || fetching || inUse(el)) return;
      fetching = true;
      try {
        const res = await fetch(el.dataset.live, { headers: { accept: "text/html" }, credentials: "same-origin", cache: "no-store" });
        if (res.redirected || !res.ok) return; // signed out or failing: leave the page as it is
        const text = await res.text();
        // The focus may have moved in while the fragment was on its way: then the next tick.
        if (text !== last && !inUse(el)) {
          const [x, y] = [window.scrollX, window.scrollY];
          el.innerHTML = text;
          last = text;
          window.scrollTo(x, y);
        }
      } catch {
        // offline for a moment: the next tick tries again
      } finally {
        fetching = false;
      }
    };
    setInterval(refresh, EVERY_MS);
    el.addEventListener("focusout", (e) => {
      if (!el.contains(e.relatedTarget)) window.setTimeout(refresh, 0);
    });
  }
})();
