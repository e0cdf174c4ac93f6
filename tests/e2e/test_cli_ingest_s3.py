"""`cairn ingest s3://bucket/prefix` as a user runs it, against moto's S3 server (the CLI's boto3
client finds it through AWS_ENDPOINT_URL_S3, as it would find a real endpoint)."""

import os
import subprocess
import sys

import pytest

from tests import moto_s3
from tests.moto_s3 import s3_client

s3_endpoint = moto_s3.s3_endpoint  # the fixture: one moto server for the module

pytestmark = pytest.mark.e2e
ROOT = "cairn://resources/handbook"


@pytest.fixture(scope="module")
def endpoint(s3_endpoint):
    """moto's server, holding a bucket ``docs`` with a handbook under ``handbook/``."""
    s3 = s3_client(s3_endpoint)
    s3.create_bucket(Bucket="docs")
    s3.put_object(Bucket="docs", Key="handbook/travel/hotels.md",
                  Body=b"# Hotels\n\nHotel costs above 200 euros per night need a manager's approval.\n")
    s3.put_object(Bucket="docs", Key="handbook/README.md", Body=b"# Company handbook\n\nPolicies for travel.\n")
    s3.put_object(Bucket="docs", Key="handbook/logo.png", Body=b"\x89PNG\r\n\x1a\n")
    return s3_endpoint


def run(*args, home, env):
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env = {**base, "CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, **env}
    return subprocess.run([sys.executable, "-m", "cairn.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def aws(endpoint):
    return {"AWS_ENDPOINT_URL_S3": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1"}


def test_an_s3_prefix_is_ingested_searched_and_re_ingested_without_embedding(endpoint, tmp_path):
    home = tmp_path / "home"
    out = run("ingest", "s3://docs/handbook", "--uri", ROOT, home=home, env=aws(endpoint))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("2 documents -> ")
    assert "Ingesting s3://docs/handbook into cairn://resources/handbook" in out.stderr
    assert "skipped s3://docs/handbook/logo.png: unsupported file type '.png'" in out.stderr

    found = run("find", "who approves an expensive hotel night?", "--limit", "3", home=home, env={})
    assert found.returncode == 0, found.stderr
    assert f"{ROOT}/travel/hotels.md" in found.stdout

    again = run("ingest", "s3://docs/handbook/", "--uri", ROOT, home=home, env=aws(endpoint))
    assert again.returncode == 0, again.stderr
    assert "(0 embedded, " in again.stdout and " 0 removed)" in again.stdout


@pytest.mark.parametrize(("location", "credentials", "says"), [
    ("s3://no-such-bucket/handbook", True,
     "error: cannot read s3://no-such-bucket/handbook: the bucket does not exist; check its name"),
    ("s3://docs/handbok", True, "error: nothing to ingest under s3://docs/handbok: no object there; check the prefix"),
    ("s3://docs/handbook", False, "error: cannot read s3://docs/handbook: no AWS credentials found; set AWS_PROFILE"),
    ("s3:///handbook", True, "error: 's3:///handbook' names no bucket; write s3://BUCKET/PREFIX"),
])
def test_what_cannot_be_read_is_one_line_naming_the_location_and_the_fix(endpoint, tmp_path, location, credentials, says):
    env = aws(endpoint) if credentials else {"AWS_ENDPOINT_URL_S3": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
    out = run("ingest", location, "--uri", ROOT, home=tmp_path / "home", env=env)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith(says), out.stderr
    assert "Traceback" not in out.stderr
