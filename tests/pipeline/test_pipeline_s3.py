"""S3 through a local endpoint (moto's server on 127.0.0.1), same code path as real S3:
listing and reading shards, staging and ingest. Credentials stay out of records."""

from __future__ import annotations

import pytest

from flows.params import FlowParams
from support.shards import write_shard
from tasks import storage
from tasks.ingest import ingest
from tasks.prompt_shards import list_shards, read_shard
from tasks.staging import Staging
from tasks.storage import S3Options
from support.synthetic_staging import manifest_for, synthetic_results

pytestmark = pytest.mark.slow  # starts the moto server


def put_shard(bucket_path: str, rows: list[dict[str, str]]) -> None:
    fs, path = storage.filesystem(f"s3://{bucket_path}")
    write_shard(path, rows, filesystem=fs)


@pytest.fixture
def bucket(s3_env, make_bucket) -> str:
    make_bucket(s3_env, "prompts")
    return "prompts"


def test_list_and_read_shards_on_s3(bucket):
    put_shard(f"{bucket}/set/a-000.parquet", [{"id": "a", "prompt": "x"}, {"id": "b", "prompt": ""}])
    put_shard(f"{bucket}/set/nested/a-001.parquet", [{"id": "c", "prompt": "y"}])
    refs = list_shards(f"s3://{bucket}/set", "*.parquet")
    assert [r.shard_id for r in refs] == ["a-000.parquet", "nested/a-001.parquet"]
    assert refs[0].uri == f"s3://{bucket}/set/a-000.parquet"
    shard = read_shard(refs[0], f"s3://{bucket}/set")
    assert [r.id for r in shard.rows] == ["a"] and shard.rejected[0].index == 1
    again = read_shard(refs[0], f"s3://{bucket}/set")
    assert again.fingerprint == shard.fingerprint and len(shard.fingerprint) == 32


def test_staging_on_s3_ingests_into_local_duckdb(bucket, tmp_db):
    staging = Staging(f"s3://{bucket}/staging")
    table = synthetic_results("a.parquet", 25)
    staging.write_shard(manifest_for("r1", "a.parquet", table), table)
    assert staging.committed_shard_ids("r1") == ["a.parquet"]
    assert ingest(str(tmp_db), staging, "r1").num_rows == 25
    assert ingest(str(tmp_db), staging, "r1").num_skipped == 1


def test_endpoint_from_parameters_credentials_from_a_block_never_recorded(
        s3_server, make_bucket, monkeypatch, tmp_path, prefect_api):
    from tasks.credentials import S3Credentials

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    S3Credentials(access_key_id="AKIDTEST", secret_access_key="very-secret-value").save("s3-test-creds", overwrite=True)
    params = FlowParams(source="s3://prompts/set", db=str(tmp_path / "r.duckdb"),
                        s3_endpoint_url=s3_server, s3_credentials_block="s3-test-creds")
    opts = params.s3_options()
    assert (opts.access_key_id, opts.secret_access_key) == ("AKIDTEST", "very-secret-value")
    make_bucket(s3_server, "params-bucket")
    fs, root = storage.filesystem("s3://params-bucket/x", opts)
    assert root == "params-bucket/x"
    storage.write_bytes_atomically(fs, "params-bucket/x/hello", b"hi")
    assert storage.read_bytes(fs, "params-bucket/x/hello") == b"hi"
    for text in (repr(opts), repr(params), str(params.recorded_config()), str(params.shareable())):
        assert "very-secret-value" not in text
    assert isinstance(opts, S3Options) and opts.public_dict()["endpoint_url"] == s3_server
