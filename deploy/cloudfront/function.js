// Rendered from ratings_api/contract.py by `python -m deploy.render`: edit
// deploy/templates/function.js.j2, not this file.
//
// The ratings API on Amazon CloudFront in front of the S3 bucket that
// `python generate.py --publish s3://BUCKET[/PREFIX]` filled: a CloudFront
// Function (runtime cloudfront-js-2.0), associated with the distribution's
// default behavior twice, on viewer-request and on viewer-response.
// deploy/cloudfront/template.yaml holds this very code (rendered from the same
// template); tests/test_cloudfront.py runs it in node on CloudFront-shaped events.
//
// viewer-request: the rewrite of `<id>/rating/` to its object, the redirect of
// the no-slash form, the JSON 405 and the CORS preflight, and the JSON 404 for
// every path that no published object may answer. The bucket's prefix is the
// origin's OriginPath: this code does not know it.
// viewer-response: the front page's Content-Security-Policy.

var FRONT_PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
var NOT_FOUND = '{"detail": "Not found."}\n';
// A canonical decimal id, no longer than the generator's largest (contract.MAX_ID).
var RATING = /^\/away\/api\/articles\/([1-9][0-9]{0,15})\/rating(\/?)$/;
// S3's limit on a key, less room for the bucket's prefix.
var MAX_PATH_BYTES = 900;

function handler(event) {
    if (event.context.eventType === 'viewer-response') {
        return frontPagePolicy(event);
    }
    return route(event.request);
}

function route(request) {
    var method = request.method;
    if (method === 'OPTIONS') {
        return answer(204, null, {
            'allow': 'GET, HEAD, OPTIONS',
            'access-control-allow-methods': 'GET, HEAD, OPTIONS',
            'access-control-allow-headers': '*',
            'access-control-max-age': '86400'
        });
    }
    if (method !== 'GET' && method !== 'HEAD') {
        return answer(405, '{"detail": "Method \\"' + method + '\\" not allowed."}\n', {
            'allow': 'GET, HEAD, OPTIONS',
            'content-type': 'application/json'
        });
    }
    var path = decodedPath(request.uri);
    if (path === null) {
        return notFound();
    }
    var rating = RATING.exec(path);
    if (rating) {
        if (rating[2] === '/') {
            request.uri = '/away/api/articles/' + rating[1] + '/rating/index.json';
            return request;
        }
        // A client resolves `rating/` against the path as sent: from
        // `7%2Frating`, to articles/rating/. A function cannot ask S3 whether
        // the object exists: the redirect comes first, a missing article after.
        if (!/\/rating$/.test(request.uri)) {
            return notFound();
        }
        return answer(301, null, { 'location': 'rating/' + query(request.querystring) });
    }
    // Below articles/ the only resource is <id>/rating/.
    if (path.indexOf('/away/api/articles/') === 0 || path === '/away/api/articles') {
        return notFound();
    }
    // A folder's page, as static hosts serve it: `/` is the front page.
    request.uri = encodedPath(path.charAt(path.length - 1) === '/' ? path + 'index.html' : path);
    return request;
}

// The decoded path as the URI of its object: each segment percent-encoded
// whole. encodeURI would leave `?`, `#` and `;` as they are, and
// `/index.html%3Facl` would reach S3 as `/index.html?acl`, a subresource.
function encodedPath(path) {
    var segments = path.split('/');
    for (var i = 0; i < segments.length; i++) {
        segments[i] = encodeURIComponent(segments[i]);
    }
    return segments.join('/');
}

// The path, %XX decoded (an encoded slash is a slash), or null where no
// object may answer: undecodable, too long for a key, a NUL, a backslash or
// another control character, an empty segment, or a segment that starts with
// a dot (`.`, `..`, the publisher's state, your dotfiles).
function decodedPath(uri) {
    var path;
    try {
        path = decodeURIComponent(uri);
    } catch (e) {
        return null;
    }
    if (path.charAt(0) !== '/' || path.length > MAX_PATH_BYTES) {
        return null;
    }
    if (/[\u0000-\u001f\u007f\\]/.test(path) || path.indexOf('//') !== -1 ||
            path.indexOf('/.') !== -1) {
        return null;
    }
    return path;
}

// CloudFront's querystring object back to `?a=1&b=2` (kept on the redirect).
function query(querystring) {
    var parts = [];
    var names = Object.keys(querystring || {});
    for (var i = 0; i < names.length; i++) {
        var entry = querystring[names[i]];
        var values = entry.multiValue ? entry.multiValue : [entry];
        for (var j = 0; j < values.length; j++) {
            parts.push(values[j].value === '' ? names[i] : names[i] + '=' + values[j].value);
        }
    }
    return parts.length ? '?' + parts.join('&') : '';
}

function notFound() {
    return answer(404, NOT_FOUND, { 'content-type': 'application/json' });
}

// The function's own answers carry what the response headers policy adds to
// the bucket's: CORS, nosniff and the Cache-Control.
function answer(status, body, headers) {
    var all = {
        'access-control-allow-origin': { value: '*' },
        'x-content-type-options': { value: 'nosniff' },
        'cache-control': { value: 'public, max-age=0, must-revalidate' }
    };
    var names = Object.keys(headers);
    for (var i = 0; i < names.length; i++) {
        all[names[i]] = { value: headers[names[i]] };
    }
    var response = { statusCode: status, statusDescription: DESCRIPTIONS[status], headers: all };
    if (body !== null) {
        response.body = { encoding: 'text', data: body };
    }
    return response;
}

var DESCRIPTIONS = {
    204: 'No Content',
    301: 'Moved Permanently',
    404: 'Not Found',
    405: 'Method Not Allowed'
};

function frontPagePolicy(event) {
    var uri = event.request.uri;
    var response = event.response;
    if ((uri === '/' || uri === '/index.html') && response.statusCode === 200) {
        response.headers['content-security-policy'] = { value: FRONT_PAGE_CSP };
    }
    return response;
}
