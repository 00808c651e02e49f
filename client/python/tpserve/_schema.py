"""Loads the tpserve client protocol (comm/schema/client.capnp) with pycapnp at import time.

The schema files are the repository's own: the package build copies them into tpserve/schema (setup.py);
run from a source checkout without installing, they are read from comm/schema. Their import
"/capnp/c++.capnp" resolves against pycapnp's own copy (it ships one), else Debian's /usr/include.
"""
from pathlib import Path

import capnp

_PACKAGE_DIR = Path(__file__).resolve().parent


def _schema_dir() -> Path:
    for candidate in (_PACKAGE_DIR / "schema", _PACKAGE_DIR.parents[2] / "comm" / "schema"):
        if (candidate / "client.capnp").is_file():
            return candidate
    raise ImportError("tpserve: client.capnp not found; install the package with `pip install ./client/python`")


def _capnp_import_root() -> str:
    # Checked here because pycapnp aborts the process (not an exception) when an import fails.
    for root in (Path(capnp.__file__).resolve().parents[1], Path("/usr/include")):
        if (root / "capnp" / "c++.capnp").is_file():
            return str(root)
    raise ImportError("tpserve: capnp/c++.capnp not found (neither in pycapnp nor in /usr/include)")


client = capnp.load(str(_schema_dir() / "client.capnp"), imports=[_capnp_import_root()])
PROTOCOL_VERSION: int = client.kClientProtocolVersion
