"""Local folders and S3 prefixes behind one pyarrow filesystem interface.

S3 settings come from flow parameters or, when absent, the standard AWS environment
(`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`, `AWS_REGION`, credentials via the AWS SDK's
default chain). The secret key is never part of a repr, a log line or recorded config.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.fs as pafs


@dataclasses.dataclass(frozen=True)
class S3Options:
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = dataclasses.field(default=None, repr=False)

    def public_dict(self) -> dict[str, str | None]:
        """What may be recorded next to results: no credentials."""
        return {"endpoint_url": self.resolved_endpoint(), "region": self.resolved_region()}

    def resolved_endpoint(self) -> str | None:
        return (
            self.endpoint_url
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or None
        )

    def resolved_region(self) -> str:
        return self.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def filesystem(uri: str, s3: S3Options | None = None) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) for a local path or an s3://bucket/prefix URI."""
    if not is_s3(uri):
        return pafs.LocalFileSystem(), str(Path(uri).expanduser().resolve())
    s3 = s3 or S3Options()
    kwargs: dict[str, object] = {"region": s3.resolved_region()}
    endpoint = s3.resolved_endpoint()
    if endpoint:
        parsed = urlparse(endpoint)
        kwargs["endpoint_override"] = parsed.netloc + parsed.path.rstrip("/")
        kwargs["scheme"] = parsed.scheme or "https"
    if s3.access_key_id and s3.secret_access_key:
        kwargs["access_key"] = s3.access_key_id
        kwargs["secret_key"] = s3.secret_access_key
    return pafs.S3FileSystem(**kwargs), uri[len("s3://") :].rstrip("/")


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def display(uri_base: str, fs_path: str) -> str:
    """A user-facing URI for a path inside the filesystem of `uri_base`."""
    return f"s3://{fs_path}" if is_s3(uri_base) else fs_path


def write_bytes_atomically(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Readers see the old object or the new one, never a partial one.

    Local: write a temporary file, then rename. S3: a single PUT only becomes visible when
    complete, so write directly.
    """
    parent = path.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    if isinstance(fs, pafs.S3FileSystem):
        with fs.open_output_stream(path) as out:
            out.write(data)
        return
    tmp = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with fs.open_output_stream(tmp) as out:
            out.write(data)
        fs.move(tmp, path)
    except BaseException:  # an error, a signal, a cancellation: leave no temporary file
        with contextlib.suppress(OSError):
            fs.delete_file(tmp)
        raise


def read_bytes(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_stream(path) as src:
        return src.read()


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound
