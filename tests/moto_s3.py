"""moto's S3 server, for tests that reach S3 through a real boto3 client (import the fixture)::

    from tests import moto_s3
    s3_endpoint = moto_s3.s3_endpoint  # the fixture, in the test module
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.ports import fresh_moto


@pytest.fixture(scope="module")
def s3_endpoint():
    """The URL of a moto server on 127.0.0.1 (a free port), for the test module."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield fresh_moto(f"http://{host}:{port}")
    server.stop()


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client of the moto server at ``endpoint``."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")
