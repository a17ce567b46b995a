"""GGUF files from the Hugging Face Hub, through ``huggingface_hub`` (the ecosystem's client): its
cache (``HF_HUB_CACHE`` / ``HF_HOME``, shared with llama.cpp's ``-hf``, LM Studio's importer,
transformers), ``HF_ENDPOINT`` (a mirror), ``HF_HUB_OFFLINE``, and ``HF_TOKEN`` (or ``hf auth
login``) for gated repos.

A pull, in order (https://huggingface.co/docs/huggingface_hub/guides/download):

1. **What the Hub says**: ``HEAD {endpoint}/{repo}/resolve/{revision}/{file}`` (``get_hf_file_metadata``)
   gives the commit (``X-Repo-Commit``), the size (``X-Linked-Size``) and the checksum: for an LFS
   file the ``X-Linked-Etag`` is its sha256 (https://huggingface.co/docs/hub/storage-backends), for
   a small file the ``ETag`` is git's blob id; the model's card (``GET /api/models/{repo}/revision/{rev}``)
   gives its licence, shown with its link before anything is downloaded.
2. **Room**: the file's missing bytes must fit on the cache's disk, checked before the first byte.
3. **The bytes**, with ``huggingface_hub``'s ``http_get`` (its retries, its progress bar class):
   into ``blobs/<etag>.incomplete``, a name that outlives the process, so a pull cut short (the
   connection, Ctrl-C, a kernel restart) resumes from where it stopped with a ``Range`` request.
   Why not ``hf_hub_download`` for this step: since huggingface_hub 1.x it writes to a file unique
   to the process and deletes it on failure (huggingface_hub PR 4228), so only a retry within one
   call resumes; a model of several GB lost to a Wi-Fi drop would start again from zero.
4. **The checksum**: the file must hash to what the Hub said, else it is deleted and the pull fails.
5. **Into the cache**: ``hf_hub_download`` then finds the blob and links it into the cache's
   ``snapshots/<commit>/`` and ``refs/`` (its lock, its layout), so every tool that reads the
   cache finds the file.

Run time reads only the disk (``downloaded``, ``find``): no request, whatever the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nb_agent.agent.models.catalog import TABLE, HubFile, named
from nb_agent.agent.models.errors import ChecksumError, NoRoom, PullError
from nb_agent.errors import UsageError

DEFAULT_ENDPOINT = "https://huggingface.co"
HEADROOM = 64 * 1024 * 1024  # bytes left free on the disk after a pull: a full disk breaks everything else
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_TRUE = ("1", "on", "yes", "true")

Say = Callable[[str], None]


def endpoint() -> str:
    """``HF_ENDPOINT`` as it is now: huggingface_hub reads it once, at import, and a notebook may set
    it later, so every call here passes it explicitly."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or transformers' ``TRANSFORMERS_OFFLINE``) as the user set it, read now
    (not the value a run sets for itself: a pull from the widget may start during a run)."""
    with _offline_lock:
        mine = _offline_depth > 0
        value = _offline_before if mine else os.environ.get("HF_HUB_OFFLINE")
    return (value or "").strip().lower() in _TRUE or os.environ.get("TRANSFORMERS_OFFLINE", "").strip().lower() in _TRUE


_offline_lock = threading.Lock()
_offline_depth = 0
_offline_before: str | None = None


@contextlib.contextmanager
def offline_run() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` while it is held (nested holds share it), as it was after: a run on a
    local model needs no network, and says so to whatever in the process reads the variable.

    huggingface_hub reads the variable once, when it is imported: imported first during a run, it
    would stay offline for the whole process. So it is imported (its constants, about 60 ms) before
    the variable is set, and reads the user's own setting."""
    global _offline_depth, _offline_before
    if importlib.util.find_spec("huggingface_hub") is not None:
        import huggingface_hub.constants  # noqa: F401 - read before the run sets the variable
    with _offline_lock:
        if _offline_depth == 0:
            _offline_before = os.environ.get("HF_HUB_OFFLINE")
            os.environ["HF_HUB_OFFLINE"] = "1"
        _offline_depth += 1
    try:
        yield
    finally:
        with _offline_lock:
            _offline_depth -= 1
            if _offline_depth == 0:
                if _offline_before is None:
                    os.environ.pop("HF_HUB_OFFLINE", None)
                else:
                    os.environ["HF_HUB_OFFLINE"] = _offline_before


def cache_dir() -> Path:
    """huggingface_hub's cache folder by its documented variables, read now: ``HF_HUB_CACHE``, else
    ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``
    (https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables)."""
    if hub := os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(os.path.expandvars(hub)).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def _hf() -> Any:
    try:
        import huggingface_hub
    except ImportError as exc:
        raise UsageError(
            f"pulling from the Hugging Face Hub needs huggingface_hub: pip install 'nb-agent[local]' ({exc})"
        ) from None
    return huggingface_hub


@dataclass(frozen=True)
class Remote:
    """What the Hub says of a file, before any byte of it is downloaded."""

    commit: str
    etag: str  # the blob's name in the cache: the sha256 for LFS files, git's blob id otherwise
    size: int
    url: str  # where its bytes are (a CDN's signed URL for LFS files)
    licence: str | None
    licence_link: str | None
    gated: bool


def _licence(ref: HubFile, card: Any, siblings: list[str], commit: str) -> tuple[str | None, str | None]:
    """The licence's name and link: the card's ``license_name`` / ``license`` and ``license_link``;
    without a link, the repo's LICENSE file if it has one, else the repo's page (which shows it)."""
    data = card.to_dict() if card is not None and hasattr(card, "to_dict") else {}
    name = data.get("license_name") or data.get("license")
    link = data.get("license_link")
    if isinstance(name, list):
        name = ", ".join(str(n) for n in name)
    if not link:
        own = next((s for s in siblings if s.upper().startswith("LICENSE")), None)
        link = f"{endpoint()}/{ref.repo}/blob/{commit}/{own}" if own else f"{endpoint()}/{ref.repo}"
    # the Hub's card is the repo owner's text: a name and a link, each bounded
    return (str(name)[:200] if name else None), str(link)[:500]


def _pull_error(ref: HubFile, exc: Exception) -> PullError:
    """The Hub's refusal, said for people (huggingface_hub's exceptions carry the Hub's own message)."""
    hf = _hf()
    errors = hf.errors
    where = f"{endpoint()}/{ref.repo}"
    if isinstance(exc, errors.GatedRepoError):
        return PullError(
            f"{ref.repo} is gated: accept its terms at {where}, then set HF_TOKEN (or run `hf auth login`)"
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return PullError(f"no repo {ref.repo} on {endpoint()} (or it is private: set HF_TOKEN)")
    if isinstance(exc, errors.RevisionNotFoundError):
        return PullError(f"{ref.repo} has no revision {ref.revision!r}")
    if isinstance(exc, errors.EntryNotFoundError):
        return PullError(f"{ref.repo} has no file {ref.file} (see {where}/tree/{ref.revision or 'main'})")
    if type(exc).__name__ in ("ConnectError", "ConnectTimeout", "ReadTimeout", "OfflineModeIsEnabled"):
        return PullError(f"the Hub ({endpoint()}) cannot be reached (no network?): {exc}")
    return PullError(f"the Hub ({endpoint()}) could not be asked about {ref.path}: {exc}")


def look_up(ref: HubFile, *, token: str | bool | None = None) -> Remote:
    """The file's commit, size, checksum and licence, from the Hub (two small requests)."""
    hf = _hf()
    from huggingface_hub.file_download import get_hf_file_metadata

    base = endpoint()
    url = hf.hf_hub_url(ref.repo, ref.file, revision=ref.revision, endpoint=base)
    try:
        meta = get_hf_file_metadata(url, token=token, endpoint=base)
        info = hf.HfApi(endpoint=base).model_info(ref.repo, revision=meta.commit_hash or ref.revision, token=token)
    except Exception as exc:  # huggingface_hub's errors and httpx2's transport errors: said once, plainly
        raise _pull_error(ref, exc) from exc
    etag = (meta.etag or "").strip('"').lower()
    if not meta.commit_hash or not etag or meta.size is None:
        raise PullError(
            f"{base} did not say {ref.path}'s commit, checksum and size: is HF_ENDPOINT a Hugging Face Hub?"
        )
    siblings = [s.rfilename for s in info.siblings or []]
    name, link = _licence(ref, info.card_data, siblings, meta.commit_hash)
    return Remote(meta.commit_hash, etag, int(meta.size), str(meta.location), name, link, bool(info.gated))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def verify(path: Path, etag: str, size: int) -> None:
    """``path`` is the file the Hub described: its sha256 (LFS) or git blob id, else ``ChecksumError``
    (and the file is deleted: it is not the model, whatever it is)."""
    have = path.stat().st_size
    with path.open("rb") as f:
        if _SHA256.fullmatch(etag):
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        elif _SHA1.fullmatch(etag):  # git's blob id: sha1 of "blob <size>\0" and the bytes
            sha1 = hashlib.sha1(f"blob {have}\0".encode())
            while chunk := f.read(1 << 20):
                sha1.update(chunk)
            digest = sha1.hexdigest()
        else:
            digest = None
    if digest is None:
        raise PullError(f"the Hub's checksum for this file is not one nb-agent can check ({etag[:80]!r})")
    if have != size or digest != etag:
        path.unlink(missing_ok=True)
        raise ChecksumError(
            f"the downloaded file is not the one the Hub describes ({have:,} bytes with checksum {digest}, "
            f"expected {size:,} bytes with {etag}): it was deleted; pull it again"
        )


def _room(folder: Path, need: int) -> None:
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need + HEADROOM:
        raise NoRoom(
            f"not enough disk: the model needs {need / 1e9:.2f} GB more and {folder} has {free / 1e9:.2f} GB free "
            "(free some space, or set HF_HUB_CACHE to a larger disk)"
        )


def pull(
    ref: HubFile,
    *,
    bar: Any = None,
    say: Say = print,
    token: str | bool | None = None,
) -> Path:
    """Download ``ref`` into the cache (or find it there) and return its path. ``bar``: a tqdm-like
    class for the progress (tqdm in a terminal, ``tqdm.notebook`` in a notebook); ``say``: the
    lines a person reads (the licence first). ``PullError`` (``NoRoom``, ``ChecksumError``) if not."""
    hf = _hf()
    from filelock import FileLock
    from huggingface_hub.file_download import http_get, repo_folder_name

    if offline():
        if (found := find(ref)) is not None:
            say(f"{ref.path}: already downloaded ({found}); HF_HUB_OFFLINE is set, the Hub was not asked")
            return found
        raise PullError(f"HF_HUB_OFFLINE is set and {ref.path} is not downloaded: unset it to pull the model")
    remote = look_up(ref, token=token)
    say(f"{ref.path} @ {remote.commit[:12]}: {remote.size / 1e9:.2f} GB")
    say(f"licence: {remote.licence or 'not stated on the model card'} ({remote.licence_link})")
    storage = cache_dir() / repo_folder_name(repo_id=ref.repo, repo_type="model")
    blob = storage / "blobs" / remote.etag
    if not blob.exists():
        partial = blob.with_name(blob.name + ".incomplete")
        have = partial.stat().st_size if partial.exists() else 0
        if have > remote.size:  # not this file's beginning: start again
            partial.unlink()
            have = 0
        _room(storage, remote.size - have)
        if have:
            say(f"resuming at {have / 1e9:.2f} GB of {remote.size / 1e9:.2f} GB")
        headers = hf.utils.build_hf_headers(token=token)
        if _origin(remote.url) != _origin(endpoint()):
            headers.pop("authorization", None)  # a CDN's signed URL: the token stays with the Hub
        blob.parent.mkdir(parents=True, exist_ok=True)
        lock = cache_dir() / ".locks" / repo_folder_name(repo_id=ref.repo, repo_type="model") / f"{remote.etag}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock)), partial.open("ab") as out:  # the lock huggingface_hub takes for this blob
            try:
                http_get(
                    remote.url, out, resume_size=have, headers=headers, expected_size=remote.size,
                    displayed_filename=ref.file, tqdm_class=bar,
                )  # fmt: skip
            except Exception as exc:  # httpx2's errors after huggingface_hub's own retries, OSError
                raise PullError(f"the download of {ref.path} stopped ({exc}); pull it again to resume") from exc
        say(f"checking its sha256 ({remote.size / 1e9:.2f} GB)" if _SHA256.fullmatch(remote.etag) else "checking it")
        verify(partial, remote.etag, remote.size)
        os.replace(partial, blob)
    else:
        say(f"already downloaded: {blob}")
    try:  # the blob is there: huggingface_hub links it into snapshots/ and refs/, under its lock
        path = hf.hf_hub_download(
            ref.repo, ref.file, revision=ref.revision, cache_dir=str(cache_dir()), endpoint=endpoint(), token=token
        )
    except Exception as exc:
        raise _pull_error(ref, exc) from exc
    return Path(path)


@dataclass(frozen=True)
class Downloaded:
    """A GGUF file in the cache: its name (the table's, else its ``hf:`` path), where, how big."""

    name: str
    repo: str
    file: str
    commit: str
    path: Path  # the snapshot's link, the path llama.cpp opens
    blob: Path
    size: int


def downloaded() -> list[Downloaded]:
    """Every GGUF file in the cache (``scan_cache_dir``: the disk only, no request)."""
    if not _any_gguf():
        return []  # the common case, decided without importing huggingface_hub (about 1 s)
    try:
        from huggingface_hub import scan_cache_dir
        from huggingface_hub.errors import CacheNotFound
    except ImportError:
        return []
    try:
        info = scan_cache_dir(cache_dir())
    except (CacheNotFound, OSError, ValueError):
        return []
    out: list[Downloaded] = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for revision in sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True):
            for f in revision.files:
                if not f.file_name.endswith(".gguf") or not f.blob_path.exists():
                    continue
                name = str(f.file_path.relative_to(revision.snapshot_path))
                if any(d.repo == repo.repo_id and d.file == name for d in out):
                    continue  # an older revision of a file listed already
                row = named(repo.repo_id, name)
                label = row.name if row is not None else HubFile(repo.repo_id, name).path
                out.append(
                    Downloaded(
                        label, repo.repo_id, name, revision.commit_hash, f.file_path, f.blob_path, f.size_on_disk
                    )
                )
    return out


def _any_gguf() -> bool:
    """Whether the cache holds a GGUF file in any model's snapshot (the cache's documented layout,
    ``models--OWNER--NAME/snapshots/COMMIT/PATH``)."""
    return next(cache_dir().glob("models--*/snapshots/*/**/*.gguf"), None) is not None


def find(ref: HubFile) -> Path | None:
    """The downloaded file ``ref`` names, from the disk alone (``try_to_load_from_cache``)."""
    if not _any_gguf():
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(ref.repo, ref.file, cache_dir=str(cache_dir()), revision=ref.revision)
    return Path(found) if isinstance(found, str) and os.path.isfile(found) else None


def remove(ref: HubFile) -> list[Path]:
    """Delete ``ref``'s file from the cache, every revision of it: its links in the snapshots, and
    each blob no other link points to. By hand, not ``scan_cache_dir().delete_revisions``: that
    deletes whole revisions, and a revision may hold other files (a README, another quantisation)
    the user keeps."""
    from huggingface_hub.file_download import repo_folder_name

    storage = cache_dir() / repo_folder_name(repo_id=ref.repo, repo_type="model")
    removed: list[Path] = []
    blobs: set[Path] = set()
    for link in sorted((storage / "snapshots").glob(f"*/{ref.file}")):
        if link.is_symlink():
            blobs.add(link.resolve())
        link.unlink()
        removed.append(link)
    still = {p.resolve() for p in (storage / "snapshots").glob("**/*") if p.is_symlink()}
    for blob in sorted(blobs - still):
        blob.unlink(missing_ok=True)
        removed.append(blob)
    return removed


__all__ = [
    "TABLE",
    "Downloaded",
    "Remote",
    "cache_dir",
    "downloaded",
    "endpoint",
    "find",
    "look_up",
    "offline",
    "pull",
    "remove",
    "verify",
]
