"""The S3 client a publish uses: obstore, configured as every AWS tool is.

botocore reads the configuration (variables, config and credentials files,
profiles, SSO, credential_process); obstore's Boto3CredentialProvider hands the
credentials to obstore, which makes every request with one retry policy. A
failure of either is one line, chosen by the class of its error; of a store that
answered, with the status and S3 error code its text quotes, never the rest of
that text (which may quote a request or a key). An ``AWS_*`` variable set and
empty is unset first: obstore reads them all itself.
"""

from __future__ import annotations

import importlib.util
import os
import re
import urllib.error
import urllib.request
from datetime import timedelta
from typing import TYPE_CHECKING, Final, NamedTuple
from urllib.parse import urlsplit

from ratings_api.errors import InputError
from ratings_api.rules import url_problem
from ratings_api.store import ObjectStoreAdapter

if TYPE_CHECKING:
    from botocore.session import Session
    from obstore.store import RetryConfig, S3Config

REQUIREMENTS: Final = "requirements-publish.txt"
DEFAULT_REGION: Final = "us-east-1"  # S3's, where neither the user nor the bucket says
# The one retry policy: a 5xx, a connection refused or dropped are tried again for
# about a second and a half, then reported. No retry starts RETRY_FOR s after the
# first try, nor lasts more than TIMEOUT: a request takes at most REQUEST_MAX, which
# the lock's lease counts on (ratings_api/lock.py).
TIMEOUT: Final = 10.0
RETRY_FOR: Final = 5.0
BACKOFF_MAX: Final = 2.0
REQUEST_MAX: Final = RETRY_FOR + BACKOFF_MAX + TIMEOUT
RETRY: Final[RetryConfig] = {
    "max_retries": 4,
    "retry_timeout": timedelta(seconds=RETRY_FOR),
    "backoff": {
        "init_backoff": timedelta(milliseconds=100),
        "max_backoff": timedelta(seconds=BACKOFF_MAX),
    },
}
ACCESS_DENIED: Final = (
    "access denied (403): check the credentials "
    "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
)
SIGN_IN: Final = (
    "the profile's sign-in has expired or was never made: run aws sso login, then publish again"
)
# botocore's rule for a bucket's name (legacy names included): no host, port or key in it.
BUCKET_NAME: Final = re.compile(r"[a-zA-Z0-9._-]{1,255}")
# A region obstore can put in a host name and a signature (it panics on others).
REGION_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")
# What the configuration chain (botocore) or the store (obstore, after its retries)
# refused, by the class of the error or one it derives from. Fields in braces are the
# error's own (botocore's kwargs: names and paths, never a secret), or what a store
# answered (ANSWERED).
REASONS: Final = {
    "ProfileNotFound": "AWS_PROFILE: no profile '{profile}' in the AWS config or credentials files",
    "PartialCredentialsError": "the credentials are incomplete: {cred_var} is missing",
    "ConfigParseError": "{path}: not a valid AWS config or credentials file",
    "SSOError": SIGN_IN,
    "TokenRetrievalError": SIGN_IN,
    "CredentialRetrievalError": "the profile's credential_process failed: run it by hand to see why",
    "PermissionDeniedError": ACCESS_DENIED,
    "UnauthenticatedError": ACCESS_DENIED,
    "FileNotFoundError": "no such bucket",  # a 404 to a write: the object's would be a 200
    "GenericError": "cannot reach {endpoint} (AWS_ENDPOINT_URL)",
    # A GenericError with an answer: the store is there, and failed or refused.
    "full": "{endpoint} is full: it answered {answer}",
    "failed": "{endpoint} failed: it answered {answer}",
    "refused": "{endpoint} refused a request: it answered {answer}",
    # The others of the configuration chain: a profile's settings that give no credentials.
    "BotoCoreError": "the profile's settings give no credentials ({kind}): correct the profile",
}
# What obstore's text tells of a store's answer: the status line and the S3 error code,
# read by patterns that match neither a key nor a signature (the body may quote both).
ANSWERED: Final = re.compile(r"non-2xx status code: ([1-5][0-9]{2})( [A-Za-z][A-Za-z -]{0,40})?:")
ERROR_CODE: Final = re.compile(r"<Code>([A-Za-z][A-Za-z0-9.]{0,63})</Code>")
FULL: Final = re.compile(r"Full|Quota|Insufficient")  # 507 Insufficient Storage, XMinioStorageFull


class Destination(NamedTuple):
    """Where to publish: a bucket and a key prefix ("" or without slashes at its ends)."""

    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def parse_destination(text: str) -> Destination:
    """``s3://BUCKET[/PREFIX]`` as a Destination, or an InputError saying what is wrong."""
    expected = f"--publish: expected s3://BUCKET[/PREFIX], found '{text}'"
    try:
        parts = urlsplit(text)
    except ValueError:  # a [ or ] of an IPv6 address, unmatched
        raise InputError(expected) from None
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise InputError(expected)
    if not BUCKET_NAME.fullmatch(parts.netloc):  # not quoted: a key may be written in it
        raise InputError(
            "--publish: a bucket name holds only letters, digits, '.', '-' and '_'; "
            "a port goes in AWS_ENDPOINT_URL"
        )
    prefix = parts.path.strip("/")
    if "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
        raise InputError(f"--publish: the prefix must not have empty, . or .. parts: '{text}'")
    return Destination(parts.netloc, prefix)


def require_client() -> None:
    """An InputError naming the requirements file if boto3 or obstore is not installed."""
    if not all(map(importlib.util.find_spec, ("boto3", "obstore"))):  # found, not imported
        raise InputError(
            f"--publish needs boto3 and obstore: pip install 'ratings-api[publish]' (in a checkout: -r {REQUIREMENTS})"
        )


def open_store(destination: Destination) -> tuple[ObjectStoreAdapter, str]:
    """The client of ``destination``, counting the request it took if any; its endpoint,
    for messages.

    botocore reads the configuration as every AWS tool does (variables, config
    and credentials files, profiles, SSO, credential_process); obstore's
    Boto3CredentialProvider hands the credentials on, renewed when they expire.
    """
    from botocore.session import Session
    from obstore.auth.boto3 import Boto3CredentialProvider
    from obstore.store import S3Store

    # An ``AWS_*`` variable set and empty is unset, as a CI variable never defined arrives:
    # botocore would read an empty AWS_PROFILE as a profile named "", and obstore's S3Store
    # reads every ``AWS_*`` variable itself, before its configuration: an empty
    # AWS_ENDPOINT_URL is a panic at its first request, an empty AWS_ALLOW_HTTP a refusal
    # to start.
    for name in [name for name, value in os.environ.items() if name.startswith("AWS_")]:
        if not os.environ[name]:
            del os.environ[name]
    session = Session()
    endpoint = _endpoint(session, destination)
    credentials = session.get_credentials()
    if credentials is None:
        raise InputError(
            f"{destination}: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or AWS_PROFILE"
        )
    credentials.get_frozen_credentials()  # a sign-in or a credential_process fails here, once
    region = _region(session, destination)
    config: S3Config = {"region": region or bucket_region(destination.bucket, endpoint)}
    if endpoint:
        config["endpoint"] = endpoint
    client = S3Store(
        destination.bucket,
        prefix=destination.prefix or None,
        config=config,
        credential_provider=Boto3CredentialProvider(session),
        client_options={
            "allow_http": str(endpoint).startswith("http:"),
            "connect_timeout": timedelta(seconds=5),
            "timeout": timedelta(seconds=TIMEOUT),
        },
        retry_config=RETRY,
    )
    named = shown(endpoint) if endpoint else f"https://s3.{config['region']}.amazonaws.com"
    return ObjectStoreAdapter(client, 0 if region else 1), named


def _endpoint(session: Session, destination: Destination) -> str | None:
    """The endpoint configured: the variable, else the profile's ``endpoint_url``."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or session.get_scoped_config().get("endpoint_url")
    if not endpoint:
        return None
    # A URL obstore can send requests to (it panics on others): the base URL's rule.
    if url_problem(endpoint):
        raise InputError(  # not quoted: a key may be written in it
            f"{destination}: the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the AWS config) "
            "is not a URL such as https://HOST[:PORT]"
        )
    return str(endpoint)


def _region(session: Session, destination: Destination) -> str | None:
    """The region configured: the variable, else the profile's ``region``."""
    region = os.environ.get("AWS_REGION") or session.get_config_variable("region")
    if region and not REGION_NAME.fullmatch(region):
        raise InputError(
            f"{destination}: the region (AWS_REGION, or region in the AWS config) must be "
            f"a name such as us-east-1, found '{region}'"
        )
    return str(region) if region else None


def bucket_region(bucket: str, endpoint: str | None) -> str:
    """The region S3 names in ``x-amz-bucket-region`` to any request for the bucket.

    obstore signs for the region it is given and follows no redirect to the
    bucket's; an unsigned HEAD of the bucket is how object_store resolves it.
    """
    url = f"{endpoint or 'https://s3.amazonaws.com'}/{bucket}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as got:
            named = got.headers.get("x-amz-bucket-region")
    except urllib.error.HTTPError as refused:  # a redirect or a refusal names it too
        named = refused.headers.get("x-amz-bucket-region")
        refused.close()
    except OSError:
        named = None  # out of reach: the first request says so
    return str(named or DEFAULT_REGION)


def explain(destination: Destination, error: Exception, endpoint: str) -> str:
    """One line about what the configuration chain or the store refused, naming no secret."""
    # The answer the error quotes, "500 Internal Server Error (InternalError)"; "" if none.
    status, code = ANSWERED.search(str(error)), ERROR_CODE.search(str(error))
    answer = ""
    if status is not None:
        answer = f"{status[1]}{status[2] or ''}" + (f" ({code[1]})" if code else "")
    for kind in type(error).__mro__:
        if kind.__name__ in REASONS:
            name = kind.__name__
            if name == "GenericError" and answer:  # the store answered: it is there
                failed = "failed" if answer.startswith("5") else "refused"
                name = "full" if FULL.search(answer) else failed
            known = {"endpoint": shown(endpoint), "kind": type(error).__name__, "answer": answer}
            fields = getattr(error, "kwargs", {}) | known  # botocore's, then ours
            return f"{destination}: {REASONS[name].format_map(fields)}"
    return f"{destination}: a request failed: {type(error).__name__}"


def shown(endpoint: str) -> str:
    """``endpoint`` as messages name it: scheme, host (an IPv6 one in its brackets) and port,
    never a user name or password."""
    url = urlsplit(endpoint)
    return f"{url.scheme}://{url.netloc.rpartition('@')[2]}"
