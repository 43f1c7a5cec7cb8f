// <article-rating article-id="7">: an article's rating, from the API beside this file.
// DOM calls and a constructed style sheet only: a strict CSP (Trusted Types too) allows them.
const API = new URL("articles/", import.meta.url);
const STARS = 5;
const TOP = 5;
const TEXTS = {"en":["Not rated yet",{"one":"{count} rating","other":"{count} ratings"},{"one":"Rated {value} out of {top} by {count} reader","other":"Rated {value} out of {top} by {count} readers"}],"de":["Noch nicht bewertet",{"one":"{count} Bewertung","other":"{count} Bewertungen"},{"one":"Von {count} Leser mit {value} von {top} bewertet","other":"Von {count} Lesern mit {value} von {top} bewertet"}],"fr":["Pas encore noté",{"one":"{count} note","many":"{count} de notes","other":"{count} notes"},{"one":"Noté {value} sur {top} par {count} lecteur","many":"Noté {value} sur {top} par {count} de lecteurs","other":"Noté {value} sur {top} par {count} lecteurs"}],"es":["Aún sin valoraciones",{"one":"{count} valoración","many":"{count} de valoraciones","other":"{count} valoraciones"},{"one":"Valorado con {value} de {top} por {count} lector","many":"Valorado con {value} de {top} por {count} de lectores","other":"Valorado con {value} de {top} por {count} lectores"}],"pt":["Ainda sem avaliações",{"one":"{count} avaliação","many":"{count} de avaliações","other":"{count} avaliações"},{"one":"Avaliado com {value} de {top} por {count} leitor","many":"Avaliado com {value} de {top} por {count} de leitores","other":"Avaliado com {value} de {top} por {count} leitores"}],"it":["Non ancora valutato",{"one":"{count} valutazione","many":"{count} di valutazioni","other":"{count} valutazioni"},{"one":"Valutato {value} su {top} da {count} lettore","many":"Valutato {value} su {top} da {count} di lettori","other":"Valutato {value} su {top} da {count} lettori"}],"nl":["Nog niet beoordeeld",{"one":"{count} beoordeling","other":"{count} beoordelingen"},{"one":"Beoordeeld met {value} uit {top} door {count} lezer","other":"Beoordeeld met {value} uit {top} door {count} lezers"}],"pl":["Jeszcze bez ocen",{"one":"{count} ocena","few":"{count} oceny","many":"{count} ocen","other":"{count} oceny"},{"one":"Ocena {value} na {top} od {count} czytelnika","other":"Ocena {value} na {top} od {count} czytelników"}],"ja":["まだ評価がありません",{"other":"{count}件の評価"},{"other":"評価 {value}/{top}（{count}人）"}]};
const ID = /^(?:[1-9][0-9]{0,15})$/;
const VALUE = /^-?[0-9]+\.[0-9]$/;
const asked = new Map();

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
    answer = fetch(new URL(`${id}/rating/`, API), { credentials: "omit" }).then(async (r) => {
      const body = await r.text();
      const fail = (reason) => {
        throw { reason, status: r.status };
      };
      if (r.status == 404) fail("not-found");
      if (!r.ok) fail("server");
      let rating;
      try {
        rating = JSON.parse(body);
      } catch {}
      if (!Number.isInteger(rating?.rating_count) || !VALUE.test(rating.rating_value)) fail("bad-response");
      return rating;
    });
    asked.set(id, answer);
    answer.catch((failure) => failure.status == 404 || asked.delete(id));
  }
  return answer;
}

function span(parent, part, text) {
  const element = parent.appendChild(document.createElement("span"));
  element.setAttribute("part", part);
  if (text) element.textContent = text;
  return element;
}

function number(lang, n, digits) {
  return new Intl.NumberFormat(lang, { minimumFractionDigits: digits, maximumFractionDigits: digits }).format(n);
}

export class ArticleRatingElement extends HTMLElement {
  static observedAttributes = ["article-id", "lang"];
  #state = "";
  #id;
  #asks = 0;
  #rating = null;

  constructor() {
    super();
    this.attachShadow({ mode: "open" }).adoptedStyleSheets = [sheet];
  }

  get state() {
    return this.#state;
  }

  connectedCallback() {
    if (this.#id !== this.getAttribute("article-id")) this.#update();
  }

  attributeChangedCallback(name) {
    if (name == "lang") this.#show(this.#state, this.#rating);
    else if (this.isConnected) this.#update();
  }

  async #update() {
    const id = (this.#id = this.getAttribute("article-id"));
    const ask = ++this.#asks;
    if (!ID.test(id)) {
      this.#show("invalid", null);
      return this.#emit("error", { reason: "invalid-id", status: null });
    }
    this.#show("loading", null);
    let rating, failure;
    try {
      rating = await load(id);
    } catch (error) {
      failure = { reason: error.reason || "network", status: error.status || null };
    }
    if (ask !== this.#asks) return;
    if (failure) this.#show(failure.reason == "not-found" ? "missing" : "failed", null);
    else this.#show(rating.rating_count > 0 ? "rated" : "unrated", rating);
    this.#emit(failure ? "error" : "load", failure || rating);
  }

  #emit(type, detail) {
    this.dispatchEvent(new CustomEvent(`article-rating-${type}`, { bubbles: true, composed: true, detail }));
  }

  #given(name) {
    for (let node = this; node; node = node.getRootNode().host) {
      const found = node.closest(`[${name}]`);
      if (found) return found.getAttribute(name);
    }
  }

  #show(state, rating) {
    this.#state = state;
    this.#rating = rating;
    this.shadowRoot.replaceChildren();
    if (state != "rated" && state != "unrated") return;
    const root = span(this.shadowRoot, `rating ${state}`);
    root.setAttribute("role", "img");
    let lang = this.#given("lang");
    try {
      lang = Intl.getCanonicalLocales(lang || "en")[0];
    } catch {
      lang = "en";
    }
    const words = TEXTS[lang.split("-")[0]] ? lang : "en";
    const [unrated, counts, labels] = TEXTS[words.split("-")[0]];
    const count = rating.rating_count;
    if (!count) {
      const text = this.#given("unrated-text") ?? unrated;
      root.setAttribute("aria-label", text);
      span(root, "text", text);
      return;
    }
    const value = Number(rating.rating_value);
    const top = TOP === null ? "" : number(lang, TOP, 0);
    const numbers = { value: number(lang, value, 1), count: number(lang, count, 0), top };
    const plural = new Intl.PluralRules(lang).select(count);
    const own = new Intl.PluralRules(words).select(count);
    const text = (kind, forms) =>
      (this.#given(`${kind}-${plural}`) ?? this.#given(`${kind}-other`) ?? forms[own] ?? forms.other).replace(
        /\{(value|count|top)\}/g,
        (_, name) => numbers[name],
      );
    root.setAttribute("aria-label", text("label", labels));
    if (STARS) {
      const stars = span(root, "stars", "☆".repeat(STARS));
      const share = Math.min(Math.max(value / STARS, 0), 1);
      span(stars, "filled", "★".repeat(STARS)).style.width = `${(share * 100).toFixed(1)}%`;
    }
    span(root, "text", `${numbers.value} (${text("count", counts)})`);
  }
}

if (!customElements.get("article-rating")) customElements.define("article-rating", ArticleRatingElement);
