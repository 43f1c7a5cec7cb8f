// The types of embed.js, the <article-rating> element, for TypeScript.
// Save this file beside your code as embed.d.ts, and import the module's
// types from "./embed.js"; the element's tag and events are then typed on
// every element, the document and the window.

/** An article's rating, as the API sends it and the element shows it. */
export interface ArticleRatingDocument {
  article_url: string;
  id: number;
  rating_sum: number;
  rating_count: number;
  /** The average with one decimal, such as "4.8"; "0.0" while rating_count is 0. */
  rating_value: string;
}

/**
 * Why the element shows nothing: no such article (a 404), no answer, an error
 * status, an answer that is not a rating document, or no valid article-id.
 */
export type ArticleRatingErrorReason = "not-found" | "network" | "server" | "bad-response" | "invalid-id";

export interface ArticleRatingError {
  reason: ArticleRatingErrorReason;
  /** The API's HTTP status, or null where there was no answer or no request. */
  status: number | null;
}

/** What the element shows; "" before it is first connected. */
export type ArticleRatingState = "" | "loading" | "rated" | "unrated" | "missing" | "failed" | "invalid";

/**
 * <article-rating article-id="7">. Attributes: article-id; lang (or the closest
 * ancestor's, past shadow roots); unrated-text, count-one, count-other (and -zero,
 * -two, -few, -many), label-one, label-other (and the same), on the element or an
 * ancestor.
 */
export class ArticleRatingElement extends HTMLElement {
  static readonly observedAttributes: string[];
  readonly state: ArticleRatingState;
}

declare global {
  interface HTMLElementTagNameMap {
    "article-rating": ArticleRatingElement;
  }
  // Both bubble and are composed: a listener on the document hears every element.
  interface GlobalEventHandlersEventMap {
    "article-rating-load": CustomEvent<ArticleRatingDocument>;
    "article-rating-error": CustomEvent<ArticleRatingError>;
  }
}
