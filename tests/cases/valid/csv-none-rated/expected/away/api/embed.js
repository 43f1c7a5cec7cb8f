// <article-rating article-id="7">: an article's rating, from the API beside this file.
// DOM calls and a constructed style sheet only: a strict CSP (Trusted Types too) allows them.
const API = new URL("articles/", import.meta.url);
const STARS = null; // null: the number only
const TOP = null; // the scale's top; null: no scale
// A canonical id: for anything else the API has only a 404.
const ID = /^[1-9][0-9]{0,18}$/;
const VALUE = /^-?[0-9]+\.[0-9]$/;
const asked = new Map(); // id -> its document, or null (404): one request each

const sheet = new CSSStyleSheet();
sheet.replaceSync(`:host{display:inline-block;white-space:nowrap}
:host([hidden]){display:none}
[part~=stars]{position:relative;display:inline-block;line-height:1;font-size:var(--article-rating-size,1.2em);color:var(--article-rating-empty-color,#c9ced8)}
[part~=filled]{position:absolute;top:0;left:0;overflow:hidden;color:var(--article-rating-color,#e39b0b)}
[part~=text]{color:var(--article-rating-text-color,inherit)}
[part~=stars]+[part~=text]{margin-left:var(--article-rating-gap,.35em)}`);

function load(id) {
  let answer = asked.get(id);
  if (!answer) {
    // No preflight, no cookies. Every body is read, so that the connection is free
    // again. A failure is forgotten: a later element tries again.
    answer = fetch(new URL(`${id}/rating/`, API), { credentials: "omit" }).then(async (r) => {
      const body = await r.text();
      if (r.status == 404) return null;
      if (!r.ok) throw r.status;
      return JSON.parse(body);
    });
    asked.set(id, answer);
    answer.catch(() => asked.delete(id));
  }
  return answer;
}

function span(parent, part, text) {
  const element = parent.appendChild(document.createElement("span"));
  element.setAttribute("part", part);
  if (text) element.textContent = text;
  return element;
}

class ArticleRating extends HTMLElement {
  static observedAttributes = ["article-id"];
  #state = "";
  #id; // the article-id shown, or being fetched

  constructor() {
    super();
    this.attachShadow({ mode: "open" }).adoptedStyleSheets = [sheet];
  }

  // loading, rated, unrated, missing, failed or invalid
  get state() {
    return this.#state;
  }

  connectedCallback() {
    // Not again after a move, or an upgrade that saw the attribute.
    if (this.#id !== this.getAttribute("article-id")) this.#update();
  }

  attributeChangedCallback() {
    if (this.isConnected) this.#update();
  }

  async #update() {
    const id = (this.#id = this.getAttribute("article-id"));
    if (!ID.test(id)) return this.#show("invalid", null);
    this.#show("loading", null);
    let state = "failed";
    let rating = null;
    try {
      rating = await load(id);
      if (rating === null) state = "missing";
      else if (Number.isInteger(rating.rating_count) && VALUE.test(rating.rating_value))
        state = rating.rating_count > 0 ? "rated" : "unrated";
    } catch {
      // Unreachable, refused, not JSON: nothing shown, as for a 404.
    }
    if (this.getAttribute("article-id") === id) this.#show(state, rating);
  }

  #show(state, rating) {
    this.#state = state;
    this.shadowRoot.replaceChildren();
    if (state != "rated" && state != "unrated") return;
    const root = span(this.shadowRoot, `rating ${state}`);
    root.setAttribute("role", "img");
    const count = rating.rating_count;
    const value = rating.rating_value;
    if (!count) {
      root.setAttribute("aria-label", "Not rated yet");
      span(root, "text", "Not rated yet");
      return;
    }
    const scale = TOP === null ? "" : ` out of ${TOP}`;
    const readers = `${count.toLocaleString("en")} reader${count == 1 ? "" : "s"}`;
    root.setAttribute("aria-label", `Rated ${value}${scale} by ${readers}`);
    if (STARS) {
      const stars = span(root, "stars", "☆".repeat(STARS));
      const share = Math.min(Math.max(Number(value) / STARS, 0), 1);
      // CSSOM, which a CSP allows, unlike a style attribute.
      span(stars, "filled", "★".repeat(STARS)).style.width = `${(share * 100).toFixed(1)}%`;
    }
    const ratings = `${count.toLocaleString("en")} rating${count == 1 ? "" : "s"}`;
    span(root, "text", `${value} (${ratings})`);
  }
}

if (!customElements.get("article-rating")) customElements.define("article-rating", ArticleRating);
