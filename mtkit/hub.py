"""Hugging Face Hub names as model paths: `-m Helsinki-NLP/opus-mt-en-de` (with `--revision`).

A name that is not a path on disk and looks like `owner/name` is fetched with huggingface_hub's
`snapshot_download` into its usual cache (`HF_HUB_CACHE`, by default ~/.cache/huggingface/hub), and the
cached snapshot is used from then on; with `HF_HUB_OFFLINE=1` only the cache is read. Only the files
mtkit reads are fetched: the configs, the tokenizer's files and the safetensors weights (a pickle,
`pytorch_model.bin`, is never downloaded or opened). Every failure (no such model or revision, no
network and nothing cached, a gated model) is one sentence.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from mtkit.errors import MtkitError
from mtkit.files import EXPORT_RECORD

logger = logging.getLogger(__name__)

HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "vocab.json",
    "target_vocab.json",
    "source.spm",
    "target.spm",
    "*.safetensors",
    "model.safetensors.index.json",
    EXPORT_RECORD,
)
MISSING = "reading a model from the Hugging Face Hub needs huggingface_hub; install it with: pip install 'mtkit[hf]'."


def is_hub_name(name: str) -> bool:
    """`owner/name` that is no file or directory here, and whose `owner` is no directory here either: `runs/smal`,
    a mistyped local path beside an existing `runs/`, is a path that does not exist, not a model on the Hub."""
    return bool(HUB_NAME.fullmatch(name)) and not Path(name).exists() and not Path(name).parent.is_dir()


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve(name: str, revision: str | None = None) -> str:
    """A local path for `name`: itself when it is one; a Hub name's cached snapshot (downloaded first if need be)."""
    if not is_hub_name(name):
        if revision is not None:
            raise MtkitError(f"--revision applies to Hugging Face Hub names (owner/name); {name} is a local path.")
        return name
    check_name(name)
    return str(download(name, revision))


def check_name(name: str) -> None:
    """One sentence for an `owner/name` the Hub would refuse (`org/..`, `org/na--me`), before anything is asked.

    huggingface_hub's own rules (`validate_repo_id`), which otherwise raise a traceback from inside a download;
    without huggingface_hub the download says what to install.
    """
    try:
        from huggingface_hub.errors import HFValidationError
        from huggingface_hub.utils import validate_repo_id
    except ImportError:
        return
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise MtkitError(
            f"{name} is neither a local path nor a valid Hugging Face Hub name (owner/name of letters, digits, "
            "'-', '_' and '.', without '--' or '..', not starting or ending with '-' or '.')."
        ) from None


def download(repo: str, revision: str | None = None) -> Path:
    """The snapshot of `repo` at `revision` (default: main) in the Hub cache, or one sentence."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise MtkitError(MISSING) from None
    at = f"{repo} (revision {revision or 'main'})"
    cache = os.environ.get("HF_HUB_CACHE") or None  # read now: huggingface_hub reads it once, when imported
    try:
        path = snapshot_download(
            repo, revision=revision, allow_patterns=list(FILES), cache_dir=cache, local_files_only=offline()
        )
    except GatedRepoError:
        raise MtkitError(
            f"{at} is gated on the Hugging Face Hub: accept its terms and log in (hf auth login)."
        ) from None
    except RepositoryNotFoundError:
        raise MtkitError(f"no model {repo} on the Hugging Face Hub (or it is private).") from None
    except RevisionNotFoundError:
        raise MtkitError(f"{repo} has no revision {revision!r} on the Hugging Face Hub.") from None
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if offline() else "the Hub cannot be reached"
        raise MtkitError(f"{at} is not in the Hugging Face cache and {why}; download it once with a network.") from None
    except (HfHubHTTPError, OSError) as exc:
        raise MtkitError(f"{at} could not be downloaded from the Hugging Face Hub ({type(exc).__name__}).") from None
    logger.info("%s is %s", at, path)
    return Path(path)
