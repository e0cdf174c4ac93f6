"""Secret references in settings, resolved through Powertools Parameters against moto."""

from __future__ import annotations

import json
import subprocess
import sys

import boto3
import pytest

from cairn.core.errors import ConfigError
from cairn.ports.secrets import SecretResolver, SecretUnavailable, is_reference

pytestmark = pytest.mark.integration
moto = pytest.importorskip("moto")


@pytest.fixture
def aws(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    with moto.mock_aws():
        yield boto3.client("ssm"), boto3.client("secretsmanager")


def test_plain_values_pass_through_without_aws():
    resolver = SecretResolver()
    assert resolver.resolve("pc-plain-key") == "pc-plain-key" and resolver.resolve(None) is None
    assert is_reference("ssm:/x") and is_reference("secretsmanager:x") and not is_reference("sk-123")


def test_an_ssm_secure_string_is_decrypted_and_cached(aws):
    ssm, _ = aws
    ssm.put_parameter(Name="/cairn/test/pinecone", Value="pc-one", Type="SecureString")
    resolver = SecretResolver(max_age_s=300)
    assert resolver.resolve("ssm:/cairn/test/pinecone") == "pc-one"
    ssm.put_parameter(Name="/cairn/test/pinecone", Value="pc-two", Type="SecureString", Overwrite=True)
    assert resolver.resolve("ssm:/cairn/test/pinecone") == "pc-one"  # cached: no second read
    assert SecretResolver(max_age_s=0).resolve("ssm:/cairn/test/pinecone") == "pc-two"  # rotation seen


def test_a_secrets_manager_secret_and_one_field_of_a_json_secret(aws):
    _, sm = aws
    sm.create_secret(Name="cairn/test/cohere", SecretString="co-key")
    arn = sm.create_secret(Name="cairn/test/pinecone", SecretString=json.dumps({"api_key": "pc-key", "env": "x"}))["ARN"]
    resolver = SecretResolver()
    assert resolver.resolve("secretsmanager:cairn/test/cohere") == "co-key"
    assert resolver.resolve("secretsmanager:cairn/test/pinecone#api_key") == "pc-key"
    assert resolver.resolve(f"secretsmanager:{arn}#api_key") == "pc-key"
    with pytest.raises(SecretUnavailable, match=r"has no text field 'token'; its fields: \['api_key', 'env'\]"):
        resolver.resolve("secretsmanager:cairn/test/pinecone#token", setting="CAIRN_PINECONE_API_KEY")


def test_a_missing_secret_names_the_setting_the_reference_and_the_permission(aws):
    with pytest.raises(SecretUnavailable) as err:
        SecretResolver().resolve("ssm:/cairn/nope", setting="CAIRN_PINECONE_API_KEY")
    msg = err.value.message
    assert msg.startswith("CAIRN_PINECONE_API_KEY: cannot read 'ssm:/cairn/nope'") and "ssm:GetParameter" in msg
    assert isinstance(err.value, ConfigError) and not err.value.retryable
    with pytest.raises(SecretUnavailable, match="secretsmanager:GetSecretValue"):
        SecretResolver().resolve("secretsmanager:cairn/nope")


def test_importing_the_module_does_not_import_powertools():
    code = "import sys, cairn.ports.secrets; assert 'aws_lambda_powertools' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
