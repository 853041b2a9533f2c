"""Validation of ConfigMap and Secret data, and of DNS-1035 names (Services).

A ConfigMap or Secret key becomes a file name in a volume, so the API server allows only
``[-._a-zA-Z0-9]+`` (not ``.`` or ``..``, not starting with ``..``, at most 253
characters): a notebook called "my notebook.ipynb" used as a key is refused on a real
cluster. A key may not be in both ``data`` and ``binaryData``, and all of it together may
not pass 1 MiB (etcd's object limit). Service names are DNS-1035 labels: they must
start with a letter, since they become DNS names.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

Causes = list[tuple[str, str]]

MAX_DATA_BYTES = 1024 * 1024
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def dns_1035_label(value: str, path: str) -> Causes:
    """A Service's name: lower case, starts with a letter, at most 63 characters."""
    if value and len(value) > 63:
        return [(path, f'Invalid value: "{value}": must be no more than 63 characters')]
    if not value or not _DNS_1035.match(value):
        return [
            (
                path,
                f"Invalid value: \"{value}\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            )
        ]
    return []


def _config_key(key: str, path: str) -> Causes:
    if len(key) > 253:
        return [(path, f'Invalid value: "{key}": must be no more than 253 characters')]
    if not _CONFIG_KEY.match(key):
        return [
            (
                path,
                f"Invalid value: \"{key}\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            )
        ]
    if key in (".", ".."):
        return [(path, f"Invalid value: \"{key}\": must not be '{key}'")]
    if key.startswith(".."):
        return [(path, f"Invalid value: \"{key}\": must not start with '..'")]
    return []


def _decoded_size(value: Any) -> int:
    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return len(str(value))


def validate_data(kind: str, obj: dict[str, Any]) -> Causes:
    """ConfigMap ``data``/``binaryData`` or Secret ``data``/``stringData`` keys and size."""
    causes: Causes = []
    total = 0
    if kind == "ConfigMap":
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        for key, value in data.items():
            causes += _config_key(key, f"data[{key}]")
            total += len(str(value).encode())
        for key, value in binary.items():
            causes += _config_key(key, f"binaryData[{key}]")
            if key in data:
                causes.append(
                    (
                        f"binaryData[{key}]",
                        f'Invalid value: "{key}": duplicate of key present in data',
                    )
                )
            total += _decoded_size(value)
    elif kind == "Secret":
        for key, value in (obj.get("data") or {}).items():
            causes += _config_key(key, f"data[{key}]")
            total += _decoded_size(value)
        for key in obj.get("stringData") or {}:
            causes += _config_key(key, f"stringData[{key}]")
    else:
        return []
    if total > MAX_DATA_BYTES:
        causes.append(("", f"Too long: must have at most {MAX_DATA_BYTES} bytes"))
    return causes
