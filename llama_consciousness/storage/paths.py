"""Where the embedded servers keep their data.

One data directory holds everything the project starts for the user
(``falkordb/`` and ``postgres/`` below it), so that deleting it is the whole
uninstall and pointing two programs at it makes them share one memory.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from llama_consciousness.errors import DataDirectoryError

HOME_ENV = "LLAMA_CONSCIOUSNESS_HOME"

# sockaddr_un.sun_path is 108 bytes on Linux including the trailing NUL; macOS
# allows 104.  Keep a margin so that redis' own checks never trip.
MAX_SOCKET_PATH = 100


def default_data_dir() -> Path:
    """The data directory used when none is given.

    ``$LLAMA_CONSCIOUSNESS_HOME`` wins; otherwise ``~/.llama_consciousness``,
    a plain dot-directory because the data is the user's, not a cache.
    """
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".llama_consciousness"


def ensure_writable_dir(path: Path) -> Path:
    """Create ``path`` if needed and prove we can write there.

    Checking with a real file instead of ``os.access`` matters: as root
    ``os.access`` says yes even on read-only mounts.
    """
    path = Path(path).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-probe-", delete=True)
        probe.close()
    except OSError as exc:
        raise DataDirectoryError(
            f"data directory {str(path)!r} is not writable ({exc.strerror or exc}); "
            f"pass another data_dir or set ${HOME_ENV}"
        ) from exc
    return path.resolve()


def socket_path_for(data_dir: Path, name: str) -> Path:
    """A unix socket path for a server owned by ``data_dir``.

    The socket lives in the data directory when the path is short enough.
    Deep directories (pytest's ``tmp_path``, long home paths) would overflow
    the ~107-byte limit of unix socket paths, so the socket then moves to a
    short directory under the system temp dir whose name is derived from the
    data directory: every process that opens the same data directory computes
    the same socket path, which is what lets them share one server.
    """
    candidate = data_dir / name
    if len(os.fsencode(str(candidate))) <= MAX_SOCKET_PATH:
        return candidate
    digest = hashlib.sha1(os.fsencode(str(data_dir.resolve()))).hexdigest()[:16]
    short_dir = Path(tempfile.gettempdir()) / f"lc-{digest}"
    short_dir.mkdir(mode=0o700, exist_ok=True)
    candidate = short_dir / name
    if len(os.fsencode(str(candidate))) > MAX_SOCKET_PATH:
        raise DataDirectoryError(
            f"cannot place a unix socket for {str(data_dir)!r}: even {str(candidate)!r} is longer "
            f"than {MAX_SOCKET_PATH} bytes (unix socket paths are limited to about 107 bytes); "
            "set TMPDIR to a shorter directory"
        )
    return candidate
