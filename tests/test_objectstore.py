"""The test object store (tests/objectstore.py) does what the publishing tests rely on."""

from __future__ import annotations

import urllib.error
import urllib.request
from contextlib import closing

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.objectstore import Store

CACHE_CONTROL = "public, max-age=0, must-revalidate"


def test_signed_write_then_anonymous_read(object_store: Store) -> None:
    object_store.create_bucket("fixture-read")
    object_store.client().put_object(
        Bucket="fixture-read",
        Key="away/a.json",
        Body=b'{"a": 1}\n',
        ContentType="application/json",
        CacheControl=CACHE_CONTROL,
    )
    with urllib.request.urlopen(object_store.url("fixture-read", "away/a.json")) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["Cache-Control"] == CACHE_CONTROL
        assert response.read() == b'{"a": 1}\n'


def test_anonymous_may_not_list(object_store: Store) -> None:
    object_store.create_bucket("fixture-list")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(object_store.endpoint + "/fixture-list/")
    error.value.close()
    assert error.value.code == 403


@pytest.mark.parametrize(
    ("bucket", "key", "secret"),
    [
        ("fixture-wrong-secret", "ratings-test-access", "wrong"),
        ("fixture-wrong-key", "someone-else", "whatever"),
    ],
)
def test_wrong_credentials_are_refused(
    object_store: Store, bucket: str, key: str, secret: str
) -> None:
    object_store.create_bucket(bucket)
    client = boto3.client(
        "s3",
        endpoint_url=object_store.endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name=object_store.region,
    )
    with closing(client), pytest.raises(ClientError) as error:
        client.put_object(Bucket=bucket, Key="x", Body=b"x")
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError):
        object_store.client().head_object(Bucket=bucket, Key="x")
