"""API errors as ``Status`` objects, with the reasons and messages the real API server uses."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error response: HTTP ``code`` with a ``kind: Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(plural, group)} "{name}" not found',
        {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural},
    )


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural},
    )


def conflict(plural: str, name: str, group: str = "", why: str | None = None) -> ApiError:
    why = (
        why
        or "the object has been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural},
    )


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    """422 Invalid; ``causes`` are (field, message) pairs such as ('metadata.name', 'Required value')."""
    summary = ", ".join(f"{field}: {message}" for field, message in causes)
    return ApiError(
        422,
        "Invalid",
        f'{kind}{"." + group if group else ""} "{name}" is invalid: {summary}',
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [
                {"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes
            ],
        },
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str, plural: str = "", name: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message, {"name": name, "kind": plural} if plural else None)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (the Kubernetes emulator does not implement {content_type})",
    )
