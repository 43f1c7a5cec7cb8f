// Rendered from ratings_api/contract.py by `python -m deploy.render`: edit
// deploy/templates/worker.js.j2, not this file.
//
// The ratings API served by a Cloudflare Worker from an R2 bucket that
// `python generate.py --publish s3://BUCKET[/PREFIX]` filled through R2's S3
// interface: one object per file of the built site, its key PREFIX/ and the
// file's path. A bucket alone is not the API (it has no `<id>/rating/` URL,
// its errors are not JSON, it sends no CORS): this Worker maps each URL to its
// object and answers with the same contract as the WhiteNoise app
// (ratings_api/server.py). tests/edges.py runs the contract suite against this
// very file under `wrangler dev` and its local R2.

const FRONT_PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const NOT_FOUND = '{"detail": "Not found."}\n';
const MAX_KEY_BYTES = 1024; // R2's limit on an object's key
// A canonical decimal id, no longer than the generator's largest (contract.MAX_ID).
const RATING = /^\/away\/api\/articles\/([1-9][0-9]{0,15})\/rating(\/?)$/;

export default {
  async fetch(request, env) {
    const method = request.method;
    if (method === "OPTIONS") {
      return answer(204, null, {
        "Allow": "GET, HEAD, OPTIONS",
        "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
        "Access-Control-Allow-Headers": "*",
        "Access-Control-Max-Age": "86400",
      });
    }
    if (method !== "GET" && method !== "HEAD") {
      const body = '{"detail": "Method \\"' + method + '\\" not allowed."}\n';
      return answer(405, body, { Allow: "GET, HEAD, OPTIONS", "Content-Type": "application/json" });
    }
    const path = decodedPath(request.url);
    if (path === null) return notFound(method);
    const prefix = env.PREFIX ? `${env.PREFIX}/` : "";
    const rating = RATING.exec(path);
    if (rating) {
      const key = `${prefix}away/api/articles/${rating[1]}/rating/index.json`;
      if (rating[2] === "/") return serveObject(request, env, key, {});
      // Redirect only where the article exists, as the app does, and only from
      // `.../rating` as sent: from `7%2Frating`, `rating/` leads to articles/rating/.
      const url = new URL(request.url);
      if (!url.pathname.endsWith("/rating")) return notFound(method);
      if ((await env.BUCKET.head(key)) === null) return notFound(method);
      const query = url.search;
      return answer(301, null, { Location: `rating/${query}` });
    }
    // Below articles/ the only resource is <id>/rating/.
    if (path.startsWith("/away/api/articles/") || path === "/away/api/articles") {
      return notFound(method);
    }
    const file = path.endsWith("/") ? `${path}index.html` : path;
    const extra = file === "/index.html" ? { "Content-Security-Policy": FRONT_PAGE_CSP } : {};
    return serveObject(request, env, prefix + file.slice(1), extra);
  },
};

// The path, %XX decoded (an encoded slash is a slash), or null where no file
// may answer: undecodable, a NUL or a backslash, an empty segment, or a
// segment that starts with a dot (`.`, `..`, the publisher's own state, your
// dotfiles).
function decodedPath(url) {
  let path;
  try {
    path = decodeURIComponent(new URL(url).pathname);
  } catch {
    return null;
  }
  if (/[\0\\]/.test(path)) return null;
  if (/\/\//.test(path) || /\/\./.test(path)) return null;
  return path;
}

async function serveObject(request, env, key, extra) {
  const method = request.method;
  // R2 throws on a key longer than it allows: no object has one.
  if (new TextEncoder().encode(key).length > MAX_KEY_BYTES) return notFound(method);
  const object = await env.BUCKET.get(key);
  if (object === null) return notFound(method);
  const headers = {
    "Content-Type": object.httpMetadata?.contentType ?? "application/octet-stream",
    ETag: object.httpEtag,
    "Last-Modified": object.uploaded.toUTCString(),
    ...extra,
  };
  // A 304 carries the validator and the policy, not the body's own metadata,
  // as the app's (RFC 9110, 15.4.5).
  if (notModified(request.headers, object)) return answer(304, null, { ETag: object.httpEtag, ...extra });
  const body = new Uint8Array(await object.arrayBuffer());
  // If-Range (RFC 9110, 13.1.5): the Range is read only for the current validator.
  const ifRange = request.headers.get("If-Range")?.trim();
  const current = ifRange === undefined || [object.httpEtag, headers["Last-Modified"]].includes(ifRange);
  const range = current ? byteRange(request.headers.get("Range"), body.length) : null;
  if (range === UNSATISFIABLE) {
    return answer(416, null, { "Content-Range": `bytes */${body.length}` }, 0);
  }
  if (range !== null) {
    const [first, last] = range;
    headers["Content-Range"] = `bytes ${first}-${last}/${body.length}`;
    return answer(206, method === "HEAD" ? null : body.slice(first, last + 1), headers, last - first + 1);
  }
  return answer(200, method === "HEAD" ? null : body, headers, body.length);
}

// RFC 9110, 13.1: If-None-Match first; If-Modified-Since only without it.
function notModified(headers, object) {
  const match = headers.get("If-None-Match");
  if (match !== null) {
    const tags = match.split(",").map((tag) => tag.trim().replace(/^W\//, ""));
    return tags.includes("*") || tags.includes(object.httpEtag);
  }
  const since = Date.parse(headers.get("If-Modified-Since") ?? "");
  // Last-Modified is sent in whole seconds: compare in whole seconds.
  return !Number.isNaN(since) && Math.floor(object.uploaded.getTime() / 1000) * 1000 <= since;
}

// What a Range header asks of a file of `size` bytes (RFC 9110, 14), as the
// app answers it (byte_range in ratings_api/server.py): [first, last], the
// one range to send; UNSATISFIABLE, a 416; or null, the whole file. Another
// unit than bytes is ignored; an invalid set of ranges is refused; ranges
// that start past the end, and the empty suffix -0, are left out (a 416 when
// none is left); several left are not merged: the whole file is sent.
const UNSATISFIABLE = "unsatisfiable";

function byteRange(value, size) {
  const equals = (value ?? "").indexOf("=");
  if (equals === -1 || value.slice(0, equals).toLowerCase() !== "bytes") return null;
  // `bytes=` names no range at all: nothing to refuse, as nginx and the app.
  if (value.slice(equals + 1).replace(/[ \t]/g, "") === "") return null;
  const satisfiable = [];
  for (const spec of value.slice(equals + 1).split(",")) {
    const found = /^([0-9]*)-([0-9]*)$/.exec(spec.replace(/^[ \t]+|[ \t]+$/g, ""));
    if (found === null || (found[1] === "" && found[2] === "")) return UNSATISFIABLE;
    // Digits past what a Number holds exactly are still ordered right as BigInts.
    const [first, last] = [found[1], found[2]].map((digits) => (digits === "" ? null : BigInt(digits)));
    if (first !== null && last !== null && last < first) return UNSATISFIABLE;
    const length = BigInt(size);
    if (first === null) {
      if (last > 0n && length > 0n) {
        satisfiable.push([Number(last >= length ? 0n : length - last), size - 1]);
      }
    } else if (first < length) {
      satisfiable.push([Number(first), Number(last === null || last >= length ? length - 1n : last)]);
    }
  }
  if (satisfiable.length === 0) return UNSATISFIABLE;
  return satisfiable.length === 1 ? satisfiable[0] : null;
}

function notFound(method) {
  return answer(404, method === "HEAD" ? null : NOT_FOUND, { "Content-Type": "application/json" },
    NOT_FOUND.length);
}

// Every answer carries CORS, nosniff and the Cache-Control: a browser reads a
// cross-origin answer (errors and redirects too) only with CORS headers, and
// ratings change at each publish, so caches keep a copy but ask again.
function answer(status, body, headers, length) {
  const all = new Headers({
    "Access-Control-Allow-Origin": "*",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "public, max-age=0, must-revalidate",
    ...headers,
  });
  // HEAD: the length GET would send, without the body.
  if (body === null && length !== undefined) all.set("Content-Length", String(length));
  return new Response(body, { status, headers: all });
}
