"""The artifact cache: the expensive pieces a study computes before its points (the main
job's reference limit), kept across output folders, so that a second run of the same
configuration, in another folder or after `--overwrite`, reads them instead of computing
them again.

An entry is found by its key alone: the SHA-256 of the artifact's name and of the
hash every point file of the study carries (`StudyFolder.config_hash`: the study, its
whole configuration and the code that computed it, `identity.code_identity`), so other
options, another seed, another meanfield source, jax or jaxlib never read it. A study
that takes the user's code (a `--block`, a `--law`) records its content's digest in its
configuration, so an edited file is another key. An entry is an archive `KEY.npz` and
its sealed side file (`folder.write_sealed_arrays`); one that fails its checks is not
used, and is replaced.

The folder: `MEANFIELD_ARTIFACT_CACHE` (default `~/.cache/meanfield/artifacts`; `off`,
`none`, `0`, `false` or empty turn the cache off).
"""

import base64
import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from .folder import read_sealed_arrays, sha256_text, write_sealed_arrays

ENV_VAR = "MEANFIELD_ARTIFACT_CACHE"
DEFAULT_FOLDER = "~/.cache/meanfield/artifacts"
_OFF = ("off", "none", "0", "false", "")


def cache_folder() -> Path | None:
    """The cache's folder (made if missing), or None where `MEANFIELD_ARTIFACT_CACHE`
    turns it off; one that cannot be made or written is refused in one line naming the
    variable (`StudyInputError`)."""
    from ..runtime.errors import StudyInputError

    value = os.environ.get(ENV_VAR, DEFAULT_FOLDER)
    if value.strip().lower() in _OFF:
        return None
    folder = Path(value).expanduser()
    why = ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        why = err.strerror or type(err).__name__
    if not why and not os.access(folder, os.W_OK | os.X_OK):
        why = "not writable"
    if why:
        raise StudyInputError(
            f"{ENV_VAR}: the artifact cache folder {folder} cannot be used ({why}); name "
            f"another folder, or 'off'"
        )
    return folder


def entry_path(folder: Path, name: str, config_hash: str) -> Path:
    """Where the artifact `name` of the configuration `config_hash` is kept."""
    return folder / f"{name}-{sha256_text(name + chr(0) + config_hash)[:32]}.npz"


def load(folder: Path, name: str, config_hash: str) -> tuple[dict | None, str]:
    """The cached arrays of `name` for `config_hash` and `""`, or None and why not
    (`"absent"`, or what failed its checks)."""
    path = entry_path(folder, name, config_hash)
    if not path.exists():
        return None, "absent"
    return read_sealed_arrays(path, {"config_sha256": config_hash, "name": name})


def store(folder: Path, name: str, config_hash: str, arrays: dict) -> str:
    """Keep `arrays` as `name` of `config_hash`; `""`, or why it could not be kept (a
    full disk, a folder made read-only since): the study goes on without it."""
    try:
        write_sealed_arrays(
            entry_path(folder, name, config_hash),
            arrays,
            {"config_sha256": config_hash, "name": name},
        )
    except OSError as err:
        return err.strerror or type(err).__name__
    return ""


def encode_arrays(arrays: dict) -> str:
    """A dict of arrays as text (an `.npz` in base64; no pickles), to send to the other
    processes of a run (`StudyRunner.artifact`)."""
    buffer = io.BytesIO()
    named: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}
    np.savez(buffer, allow_pickle=False, **named)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_arrays(text: str) -> dict:
    """The dict `encode_arrays` made."""
    with np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False) as found:
        return {k: found[k] for k in found.files}
