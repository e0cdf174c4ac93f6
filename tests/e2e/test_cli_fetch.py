"""`cairn ingest --url` as a user runs it, against a real HTTP server on loopback: refused, with the
setting that allows it named, until the operator allows the host; then fetched and found."""

import os
import subprocess
import sys

import pytest

from tests.sites import page, serve

pytestmark = pytest.mark.e2e
ROOT = "cairn://resources/web"


def run(*args, home, **env):
    base = {k: v for k, v in os.environ.items() if k != "CAIRN_FETCH_ALLOW_HOSTS"}
    env = {**base, "CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env}
    return subprocess.run([sys.executable, "-m", "cairn.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def test_a_loopback_url_is_refused_naming_the_setting_until_the_host_is_allowed(tmp_path):
    home = tmp_path / "home"
    with serve({"/": page("Admin console", "The deploy token rotates every Tuesday.")}) as site:
        url = f"http://127.0.0.1:{site.port}/"
        refused = run("ingest", "--url", url, "--uri", ROOT, home=home)
        assert f"skipped {url}: not fetched: 127.0.0.1 is a loopback address" in refused.stderr
        assert f"(CAIRN_FETCH_ALLOW_HOSTS=127.0.0.1:{site.port})" in refused.stderr
        assert refused.stdout.startswith("0 documents -> 0 records")
        assert refused.returncode == 2 and "nothing was ingested" in refused.stderr
        assert site.requests == []  # nothing was asked of the server, not even robots.txt

        allowed = run("ingest", "--url", url, "--uri", ROOT, home=home, CAIRN_FETCH_ALLOW_HOSTS=f"127.0.0.1:{site.port}")
        assert allowed.returncode == 0, allowed.stderr
        assert allowed.stdout.startswith("1 documents"), allowed.stdout
        assert site.paths == ["/robots.txt", "/"]
    found = run("find", "when does the deploy token rotate?", home=home)
    assert f"{ROOT}/127.0.0.1_{site.port}/index.html" in found.stdout, found.stdout + found.stderr
