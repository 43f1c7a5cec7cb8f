"""``--publish`` with and without an output folder, and its options without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from ratings_api.cli import main
from tests.objectstore import RATINGS, Store

REPO: Final = Path(__file__).resolve().parent.parent
STATE_KEY: Final = "p/.ratings-api/state.gz"


def run(folder: Path, store: Store, *options: str) -> subprocess.CompletedProcess[str]:
    """``generate.py`` in ``folder`` as its working directory: a fresh checkout's."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environ.update(store.environ())
    environ["AWS_CONFIG_FILE"] = str(folder / "no-aws-config")
    environ["AWS_SHARED_CREDENTIALS_FILE"] = str(folder / "no-aws-credentials")
    return subprocess.run(
        [sys.executable, "-W", "error", str(REPO / "generate.py"), *options],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def stored(store: Store, bucket: str) -> dict[str, bytes]:
    client = store.client()
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        for item in listed
    }


def built(folder: Path) -> dict[str, bytes]:
    """What a publish of a built folder puts in the bucket, under the prefix ``p``."""
    return {
        f"p/{path.relative_to(folder).as_posix()}": path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file() and path.name != "_redirects" and not path.name.startswith(".")
    }


def test_publish_alone_writes_nothing_locally_and_uploads_what_a_build_writes(
    tmp_path: Path, object_store: Store
) -> None:
    object_store.create_bucket("alone")
    (tmp_path / "ratings.yaml").write_text(RATINGS)
    done = run(tmp_path, object_store, "--publish", "s3://alone/p")
    assert done.returncode == 0, done.stderr
    # (the requests are test_publish.py's concern)
    assert done.stdout.startswith("published s3://alone/p: 10 uploaded, 0 removed, 0 unchanged; ")
    assert done.stderr == ""
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ratings.yaml"]

    checked = run(tmp_path, object_store, "--check", "--publish", "s3://alone/p")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("checked s3://alone/p: 0 to upload, 0 to remove, 10 unchanged")

    # The same bytes as a publish of a built folder, which builds it as well.
    (tmp_path / "ratings.yaml").write_text(RATINGS.replace("2: [2, 3, 2]", "2: [2, 3, 3]"))
    changed = run(tmp_path, object_store, "--check", "--publish", "s3://alone/p")
    assert changed.returncode == 1
    assert changed.stderr.startswith("checked s3://alone/p: 2 to upload, 0 to remove, 8 unchanged")
    assert changed.stderr.endswith(
        "\n  upload away/api/articles/2/rating/index.json\n  upload index.html\n"
    )
    folder = run(tmp_path, object_store, "--output", "out", "--publish", "s3://alone/p")
    assert folder.returncode == 0, folder.stderr
    assert folder.stdout.startswith("built out: 3 articles; files: 11 written, 0 removed")
    objects = stored(object_store, "alone")
    del objects[STATE_KEY]
    assert objects == built(tmp_path / "out")
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".out.generate",  # the build's own record and lock
        "out",
        "ratings.yaml",
    ]


def test_check_publish_alone_needs_no_folder(tmp_path: Path, object_store: Store) -> None:
    object_store.create_bucket("check-alone")
    (tmp_path / "ratings.yaml").write_text(RATINGS)
    done = run(tmp_path, object_store, "--check", "--publish", "s3://check-alone/p")
    assert done.returncode == 1
    assert done.stderr.startswith(
        "checked s3://check-alone/p: 10 to upload, 0 to remove, 0 unchanged; 1 request in "
    )
    assert "\n  upload away/api/articles/1/rating/index.json\n" in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ratings.yaml"]


def test_publish_alone_reports_input_errors_in_one_line(
    tmp_path: Path, object_store: Store
) -> None:
    (tmp_path / "ratings.yaml").write_text(RATINGS.replace("2: [2, 3, 2]", "2: [2, 3, 9]"))
    done = run(tmp_path, object_store, "--publish", "s3://nowhere/p")
    assert done.returncode == 2
    assert done.stderr == "ratings.yaml:5:13: article 2: rating 9 is outside the scale 1..5\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ratings.yaml"]


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--repair"], "--repair goes only with --publish"),
        (["--max-removals", "3"], "--max-removals goes only with --publish"),
        (["--max-removals", "0"], "--max-removals goes only with --publish"),
        (["--publish-workers", "4"], "--publish-workers goes only with --publish"),
        (["--check", "--repair"], "--repair goes only with --publish"),
    ],
)
def test_publishing_options_without_publish_are_refused(
    options: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--output", str(tmp_path / "never-written"), *options])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: generate.py ")
    assert err.endswith(f"\ngenerate.py: error: {line}\n")
    assert list(tmp_path.iterdir()) == []
