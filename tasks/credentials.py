"""S3 credentials as a Prefect block, so they never travel as flow parameters (which the
Prefect UI shows and stores). Workers load the block by name at run time; without one, the
worker's standard AWS environment / credential chain applies.

    from tasks.credentials import S3Credentials
    S3Credentials(access_key_id="...", secret_access_key="...").save("prompts-bucket")
    ... --param s3_credentials_block=prompts-bucket
"""

from __future__ import annotations

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from tasks.storage import S3Options


class S3Credentials(Block):
    _block_type_name = "specdec S3 credentials"
    _description = "Access key for the prompt and staging buckets of the speculative-generation flow."

    access_key_id: str = Field(description="AWS access key id")
    secret_access_key: SecretStr = Field(description="AWS secret access key (stored encrypted, never shown)")


def resolve_s3_options(endpoint_url: str | None, region: str | None, block_name: str | None) -> S3Options:
    if not block_name:
        return S3Options(endpoint_url, region)
    creds = S3Credentials.load(block_name)
    return S3Options(endpoint_url, region, creds.access_key_id, creds.secret_access_key.get_secret_value())
