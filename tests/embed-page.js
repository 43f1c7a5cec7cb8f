// test_embed_browser.py adds this to every document, before the page's own scripts
// (Page.addScriptToEvaluateOnNewDocument): it listens as a page would, and reads the page for
// the test. A page's Content-Security-Policy does not apply to it.
"use strict";

// What each element told the page, by the element's place among the document's own elements
// (an element in a card's shadow root is not the page's to place: its events come from the card).
window.heard = [];
for (const type of ["article-rating-load", "article-rating-error"]) {
  document.addEventListener(type, (event) => {
    const place = [...document.querySelectorAll("article-rating")].indexOf(event.target);
    if (place >= 0) window.heard.push([place, type, event.detail, event.composed]);
  });
}

// Each element of the page, its cards' shadow roots and its frames, as a row: its id, state,
// the role and label of its rating, its text, the stars drawn and the width filled, and
// whether it takes no room at all (nothing shown); null until there are `count` and none is
// loading.
window.shown = (count) => {
  const frames = [...document.querySelectorAll("iframe")].map((frame) => frame.contentDocument);
  const all = [document, ...frames].flatMap((page) =>
    [...page.querySelectorAll("article-rating, [data-card]")].map((e) =>
      e.matches("[data-card]") ? e.shadowRoot.querySelector("article-rating") : e));
  const rows = all.map((element) => {
    const part = (name) => element.shadowRoot && element.shadowRoot.querySelector(`[part~=${name}]`);
    const [rating, stars, filled, text] = ["rating", "stars", "filled", "text"].map(part);
    return [
      element.getAttribute("article-id"), element.state,
      rating && rating.getAttribute("role"), rating && rating.getAttribute("aria-label"),
      text && text.textContent, stars && stars.firstChild.textContent, filled && filled.style.width,
      element.getBoundingClientRect().width === 0,
    ];
  });
  const loading = rows.some((row) => row[1] == null || row[1] === "loading");
  return rows.length >= count && !loading ? rows : null;
};

// The paths the page asked of the API, or null until `count` have answered. A response enters
// the timeline once its body has come: the element reads no body from a 404, so that entry may
// come a moment after the element shows.
window.asked = (count) => {
  const paths = performance.getEntriesByType("resource")
    .map((entry) => new URL(entry.name).pathname)
    .filter((path) => path.startsWith("/away/api/"));
  return paths.length >= count ? paths : null;
};

// An element of article `id` added at the end of `parent`, as a single-page app adds one.
window.add = (id, parent) => {
  const element = document.createElement("article-rating");
  element.setAttribute("article-id", id);
  parent.append(element);
  return element;
};

// An element added with article `first`, then set to `second` and back in the same task: its
// state, its text and every event it fires, once its last fetch has long answered.
window.setBack = (first, second, done) => {
  const element = document.createElement("article-rating");
  const events = [];
  element.addEventListener("article-rating-load", (event) => events.push(event.detail.id));
  element.addEventListener("article-rating-error", (event) => events.push(event.detail.reason));
  element.setAttribute("article-id", first);
  document.body.append(element);
  element.setAttribute("article-id", second);
  element.setAttribute("article-id", first);
  const settled = () => element.state === "rated"
    ? setTimeout(() => done([element.state, element.shadowRoot.textContent, events]), 500)
    : setTimeout(settled, 20);
  settled();
};
