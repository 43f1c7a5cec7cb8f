// A page's TypeScript that uses embed.d.ts as docs/embed.md shows it: `tsc --noEmit` must
// pass (tests/test_embed_types.py), and a copy with one wrong use must not.
import type { ArticleRatingDocument, ArticleRatingElement, ArticleRatingError } from "./embed.js";

document.addEventListener("article-rating-load", (event) => {
  const value: string = event.detail.rating_value;
  const count: number = event.detail.rating_count;
  console.log(value, count, event.detail.article_url);
});

window.addEventListener("article-rating-error", (event) => {
  const error: ArticleRatingError = event.detail;
  if (error.reason === "not-found" || error.status === 500) console.log(error.reason);
});

const element: ArticleRatingElement | null = document.querySelector("article-rating");
element?.addEventListener("article-rating-load", (event) => {
  const rating: ArticleRatingDocument = event.detail;
  console.log(rating.id, element.state === "rated");
});

const made = document.createElement("article-rating");
made.setAttribute("article-id", "7");
made.lang = "de";
made.onclick = () => console.log(made.state);
document.body.append(made);
