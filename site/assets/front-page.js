// The front page's behaviour: the live lookup, the stars and the copy button.
// A separate file, not inline, so that the page's Content-Security-Policy
// needs no 'unsafe-inline'. Text goes in with textContent only, never as HTML.
"use strict";


function drawStars(widget, value, unrated = false) {
  const max = Number(widget.dataset.max);
  const share = Math.min(Math.max(value / max, 0), 1);
  // A CSSOM property, which the policy allows, unlike a style attribute in the markup.
  widget.querySelector(".stars-full").style.width = `${(share * 100).toFixed(1)}%`;
  // An article no one has rated is not "0.0 out of 5" to a screen reader.
  const label = unrated ? "not rated yet" : `${value.toFixed(1)} out of ${max} stars`;
  widget.setAttribute("aria-label", label);
  widget.classList.add("drawn");
}

function ratingsText(count) {
  if (count === 0) {
    return "not rated yet";
  }
  return `${count.toLocaleString("en")} rating${count === 1 ? "" : "s"}`;
}

function showRating(parts, id, rating, stars) {
  const value = Number(rating.rating_value);
  const scale = stars ? ` out of ${stars}` : "";
  parts.message.textContent =
    rating.rating_count === 0
      ? `Article ${id} is listed but not rated yet.`
      : `Article ${id}: ${rating.rating_value}${scale} from ${ratingsText(rating.rating_count)}.`;
  parts.average.textContent = rating.rating_value;
  const widget = parts.rating.querySelector(".stars");
  if (widget) {
    drawStars(widget, value, rating.rating_count === 0);
  }
  parts.rating.hidden = false;
}

function setOutcome(parts, outcome) {
  parts.result.dataset.outcome = outcome;
  parts.result.hidden = false;
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (error) {
    return text;
  }
}

async function lookUp(form, parts, isLatest) {
  const id = parts.input.value.trim();
  delete parts.result.dataset.outcome;
  parts.rating.hidden = true;
  parts.json.textContent = "";
  parts.status.textContent = "";
  // A canonical id, as the API's paths have them (the page names the pattern).
  if (!new RegExp(`^(?:${form.dataset.id})$`).test(id)) {
    parts.url.textContent = "";
    parts.url.removeAttribute("href");
    parts.message.textContent = "An article id is a whole number from 1 up, such as 7.";
    setOutcome(parts, "invalid");
    return;
  }
  // Relative to the page, so the lookup asks the very site that served it.
  const url = new URL(`${form.dataset.api}${id}/rating/`, document.baseURI);
  parts.url.textContent = url.pathname;
  parts.url.href = url.href;
  let response;
  let text;
  try {
    response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-cache" });
    text = await response.text();
    if (!isLatest()) {
      return; // a later lookup has started: its answer is the one to show
    }
  } catch (error) {
    if (!isLatest()) {
      return;
    }
    parts.message.textContent = `The API could not be reached (${error.message}).`;
    setOutcome(parts, "error");
    return;
  }
  parts.status.textContent = `${response.status} ${response.statusText}`.trim();
  parts.json.textContent = pretty(text);
  if (response.status === 200) {
    let rating;
    try {
      rating = JSON.parse(text);
    } catch (error) {
      // A host that answers with a page of its own, for one.
      parts.message.textContent = "The API answered 200 OK, but not with JSON.";
      setOutcome(parts, "error");
      return;
    }
    showRating(parts, id, rating, Number(form.dataset.stars));
    setOutcome(parts, "found");
  } else if (response.status === 404) {
    parts.message.textContent = `No article has the id ${id}: the API answered 404 Not Found.`;
    setOutcome(parts, "missing");
  } else {
    parts.message.textContent = `The API answered ${response.status} ${response.statusText}.`;
    setOutcome(parts, "error");
  }
}

async function copy(button) {
  const source = document.getElementById(button.dataset.copy);
  try {
    await navigator.clipboard.writeText(source.textContent);
    button.textContent = "Copied";
  } catch (error) {
    // No clipboard on a page served over plain HTTP from another machine: select it instead.
    window.getSelection().selectAllChildren(source);
    button.textContent = "Selected: press Ctrl+C";
  }
  setTimeout(() => {
    button.textContent = "Copy";
  }, 2000);
}

function start() {
  document.querySelectorAll(".stars[data-value]").forEach((widget) => {
    drawStars(widget, Number(widget.dataset.value));
  });
  document.querySelectorAll("button[data-copy]").forEach((button) => {
    button.addEventListener("click", () => copy(button));
  });
  const form = document.getElementById("lookup-form");
  const parts = {
    input: document.getElementById("article-id"),
    result: document.getElementById("result"),
    message: document.getElementById("result-message"),
    rating: document.getElementById("result-rating"),
    average: document.getElementById("result-average"),
    url: document.getElementById("result-url"),
    status: document.getElementById("result-status"),
    json: document.querySelector("#result-json code"),
  };
  let latest = 0;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const mine = ++latest;
    lookUp(form, parts, () => mine === latest);
  });
}

start();
