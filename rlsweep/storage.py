"""Where sweeps are stored: a local directory or a URI (`s3://bucket/prefix`).

S3 goes through pyarrow's S3FileSystem, the filesystem Ray Tune itself writes with. An
S3-compatible store (MinIO, Ceph, moto) is reached through an endpoint override, taken from the
standard AWS SDK variables `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`; the region from
`AWS_REGION` / `AWS_DEFAULT_REGION`. Credentials are never passed or stored here: the AWS SDK's
default chain (environment, ~/.aws, instance role) finds them in every process that needs them,
so they are neither pickled into Tune's experiment state nor copied into Ray's runtime envs (see
`no_credentials_in_ray_runtime_envs`). Workers need no endpoint variable: the filesystem Tune
ships to them carries it.

Reports read plain files, so `fetch()` copies an experiment from a URI into a local cache first.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from rlsweep._ray_compat import stop_propagating_env_vars

if TYPE_CHECKING:  # imported where used: `is_uri` (all results.py needs locally) stays cheap
    import pyarrow.fs as pafs

ENDPOINT_VARS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
CHECKPOINT_DIR = re.compile(r"checkpoint_(\d+)$")
"""Tune's name of a trial's checkpoint dirs (`checkpoint_000003`: index 3), matched with
`re.match`."""


def is_uri(path: str | os.PathLike) -> bool:
    """True for `scheme://...` (s3, gs, ...); False for local paths, `~` included."""
    return isinstance(path, str) and bool(_URI.match(path))


def user_path(path: str | os.PathLike) -> str:
    """`path` as a user types it in a shell: relative to the working directory where it lies
    inside it, quoted where the shell needs it; a URI as it is."""
    where = str(path)
    if not is_uri(where):
        with contextlib.suppress(ValueError):
            where = str(Path(where).resolve().relative_to(Path.cwd())) or "."
    return shlex.quote(where)


def s3_endpoint(endpoint: str | None = None) -> str | None:
    """The endpoint override: `endpoint` if given, else the AWS SDK's environment variables."""
    return endpoint or next((v for k in ENDPOINT_VARS if (v := os.environ.get(k))), None)


def s3_filesystem(endpoint: str | None = None, **options: object) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem with the endpoint override and region from the environment;
    credentials come from the SDK's default chain (never explicit, so never pickled).
    `options`: more of S3FileSystem's (timeouts, a retry strategy)."""
    import pyarrow.fs as pafs

    kwargs: dict[str, object] = dict(options)
    if endpoint := s3_endpoint(endpoint):
        url = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = url.netloc + url.path.rstrip("/")
        kwargs["scheme"] = url.scheme
    if region := next((v for k in REGION_VARS if (v := os.environ.get(k))), None):
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)


def filesystem(
    storage_path: str | os.PathLike, *, endpoint: str | None = None
) -> tuple[pafs.FileSystem | None, str]:
    """(filesystem, path on it) for a URI — `s3://b/p` gives (S3FileSystem, "b/p"); other schemes
    are resolved by pyarrow. A local path gives (None, the absolute path)."""
    if not is_uri(storage_path):
        return None, str(Path(storage_path).expanduser().resolve())
    uri = str(storage_path).rstrip("/")
    scheme, rest = uri.split("://", 1)
    if scheme.lower() == "s3":
        if not rest.split("/", 1)[0]:
            raise ValueError(f"{storage_path}: no bucket")
        return s3_filesystem(endpoint), rest
    import pyarrow.fs as pafs

    return pafs.FileSystem.from_uri(uri)


STORAGE_TIMEOUT_S = 10.0
"""How long `check_storage` waits for a remote store to answer."""
SKIP_REMOTE_CHECK = "--no-storage-check"
"""The flag of validate, plan, run, resume and ablate that skips the remote check: for a cluster
that reaches storage the driver cannot."""


def check_storage(
    path: str | os.PathLike, *, remote: bool = True, timeout_s: float = STORAGE_TIMEOUT_S
) -> None:
    """Raise SpecError (naming `path` and the cause) unless a sweep can keep its results at
    `path`, a results dir or `<storage>/<name>`: a local directory that exists or can be made,
    and that can be written; a URI whose bucket answers within `timeout_s` and can be listed
    with the credentials at hand (`remote=False`: not asked; `SKIP_REMOTE_CHECK`). Checked on
    the driver before Ray starts; a local check leaves nothing behind."""
    where = str(path)
    if not is_uri(where):
        _check_local(Path(where).expanduser())
    elif remote:
        _check_remote(where, timeout_s)


def _check_local(path: Path) -> None:
    import tempfile

    from rlsweep.errors import SpecError

    made: list[Path] = []
    existing = path
    while not existing.exists() and existing != existing.parent:
        made.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        raise SpecError(None, "", f"{path}: cannot be made: {existing} is a file")
    try:
        for attempt in range(3):
            try:
                path.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=path):
                    pass
                break
            except FileNotFoundError:
                # Another check of the same path (validate and plan at once, two tests) took
                # away the dirs it had made between this one's mkdir and its write.
                if attempt == 2:
                    raise
    except OSError as e:
        why = e.strerror or str(e)
        raise SpecError(None, "", f"{path}: cannot be written: {why}") from None
    finally:
        for d in made:  # deepest first: what the check made, and nothing else
            with contextlib.suppress(OSError):
                d.rmdir()


def _check_remote(uri: str, timeout_s: float) -> None:
    import concurrent.futures

    from rlsweep.errors import SpecError

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlsweep-storage")
    try:
        pool.submit(_list_remote, uri, timeout_s).result(timeout=timeout_s + 1)
    except concurrent.futures.TimeoutError:
        raise SpecError(
            None, "", f"{uri}: no answer within {timeout_s:g} s (or {SKIP_REMOTE_CHECK})"
        ) from None
    except (OSError, ValueError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SpecError(
            None,
            "",
            f"{uri}: cannot be reached or read with the credentials at hand: {why} "
            f"(where only the cluster reaches it, {SKIP_REMOTE_CHECK})",
        ) from None
    finally:
        pool.shutdown(wait=False)


def _list_remote(uri: str, timeout_s: float) -> None:
    """The bucket's existence, then a listing of `uri` (read access); OSError if refused."""
    import pyarrow.fs as pafs

    scheme, rest = uri.rstrip("/").split("://", 1)
    if scheme.lower() == "s3":
        bucket = rest.split("/", 1)[0]
        if not bucket:
            raise ValueError("no bucket")
        fs = s3_filesystem(
            connect_timeout=timeout_s,
            request_timeout=timeout_s,
            retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
        )
        if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise OSError(f"bucket {bucket!r} does not exist (or these credentials cannot see it)")
        root = rest
    else:
        fs, root = filesystem(uri)
    fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))


def tune_storage(storage_path: str | os.PathLike) -> tuple[str, pafs.FileSystem | None]:
    """`storage_path` and `storage_filesystem` for `tune.RunConfig`. Ray wants a custom
    filesystem with the scheme stripped from the path (`bucket/prefix`); passing our own also
    keeps Ray from resolving the bucket's region against AWS itself."""
    no_credentials_in_ray_runtime_envs()
    fs, path = filesystem(storage_path)
    return path, fs


CREDENTIAL_VARS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
)


def no_credentials_in_ray_runtime_envs() -> None:
    """Stop Ray Tune copying the driver's AWS credential variables into every trial's
    runtime_env: Ray's runtime_env agent logs runtime envs in plain text, so the secret key
    would land in `/tmp/ray/session_*/logs`. Trials on the driver's machine inherit the
    environment anyway (the raylet was started from it); other nodes of a cluster need their own
    credentials (instance role, ~/.aws, or variables set where `ray start` runs). Idempotent."""
    stop_propagating_env_vars(CREDENTIAL_VARS)


def cache_dir(uri: str) -> Path:
    """Local copy of `uri`: `$XDG_CACHE_HOME/rlsweep/<scheme>/<bucket>/<prefix>` (~/.cache)."""
    scheme, rest = uri.rstrip("/").split("://", 1)
    base = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser()
    return base / "rlsweep" / scheme.lower() / _safe_relative(rest)


def _safe_relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path.strip("/"))
    if any(part in ("..", "") for part in rel.parts) or rel.is_absolute():
        raise ValueError(f"{path}: not a safe relative path")
    return rel


def fetch(uri: str, dest: str | Path | None = None, *, checkpoints: bool = False) -> Path:
    """Copy an experiment (or a prefix holding several) from `uri` to `dest` (default:
    `cache_dir(uri)`) and return the local dir. Checkpoint dirs are skipped unless asked for:
    reports do not read them and they are most of the bytes. Files already there with the same
    size and mtime are not downloaded again, so re-fetching a running sweep is cheap. The
    default cache is a mirror: files no longer at `uri` (a sweep overwritten there) are deleted
    from it, so a stale trial is never read as part of the sweep."""
    import pyarrow.fs as pafs

    fs, root = filesystem(uri)
    if fs is None:
        return Path(root)
    mirror = dest is None
    dest = Path(dest) if dest is not None else cache_dir(uri)
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    files = [i for i in infos if i.type == pafs.FileType.File]
    if not files:
        raise FileNotFoundError(f"{uri}: nothing stored there")
    wanted: set[Path] = set()
    for info in files:
        rel = _safe_relative(PurePosixPath(info.path).relative_to(root).as_posix())
        if not checkpoints and any(CHECKPOINT_DIR.match(p) for p in rel.parts[:-1]):
            continue
        local = dest.joinpath(*rel.parts)
        wanted.add(local)
        mtime = info.mtime_ns
        if local.is_file():
            st = local.stat()
            if st.st_size == info.size and (mtime is None or st.st_mtime_ns == mtime):
                continue
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.part")
        with fs.open_input_stream(info.path) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        if mtime is not None:
            os.utime(tmp, ns=(mtime, mtime))
        tmp.replace(local)  # atomic: a reader never sees half a file
    if mirror:
        for stale in [p for p in dest.rglob("*") if p.is_file() and p not in wanted]:
            stale.unlink()
    return dest
