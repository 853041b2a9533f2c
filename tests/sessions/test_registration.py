"""The service's hub registration: least-privilege scopes, and the command the hub runs."""

from __future__ import annotations

import sys

import pytest
from jupyterhub.scopes import expand_scopes, scope_definitions

from gpuspawner.sessions import course_sessions_service, sessions_service_role
from gpuspawner.sessions.__main__ import build_parser


def test_the_role_grants_exactly_what_the_service_uses():
    role = sessions_service_role()
    assert role["services"] == ["course-sessions"]
    assert all(scope in scope_definitions for scope in role["scopes"])
    # As JupyterHub 6.1 expands them (the hub logs the same set for the service's token).
    assert expand_scopes(role["scopes"]) == {
        "list:users",
        "read:users:name",  # who exists, and their admin flag
        "read:servers",
        "start:servers",
        "delete:servers",  # servers: read, pre-warm, reclaim
        "read:users:groups",  # instructors through a group
        "read:groups",
        "read:groups:name",  # members of enrolled groups
        "list:services",
        "read:services",
        "read:services:name",  # the Services menu of its pages: where each leads, its name
    }


def test_a_viewers_token_carries_which_services_they_may_open():
    # Given the service with its pages (an address the hub proxies)
    service = course_sessions_service("/etc/jupyterhub/courses", port=10101)
    # Then the hub gives a viewer's OAuth token the access:services scopes they hold, and
    # no other: its pages' Services menu lists those services, as the hub's pages do
    assert service["oauth_client_allowed_scopes"] == ["access:services"]
    assert service["oauth_no_confirm"] is True


def test_the_role_follows_a_renamed_service():
    role = sessions_service_role("sessions-staging")
    assert role["name"] == "sessions-staging-service"
    assert role["services"] == ["sessions-staging"]


def test_the_service_entry_runs_this_package_with_the_secret_in_its_environment():
    service = course_sessions_service(
        "/etc/jupyterhub/courses",
        prewarm_secret="s3cret",
        interval=15,
        audit_log="/var/log/jupyterhub/sessions.jsonl",
        dry_run=True,
    )
    assert service == {
        "name": "course-sessions",
        "command": [
            sys.executable,
            "-m",
            "gpuspawner.sessions",
            "--catalog",
            "/etc/jupyterhub/courses",
            "--interval",
            "15",
            "--audit-log",
            "/var/log/jupyterhub/sessions.jsonl",
            "--dry-run",
        ],
        "environment": {"GPUSPAWNER_PREWARM_SECRET": "s3cret"},
    }
    assert "url" not in service  # a background loop: no port, no proxy route


def test_flags_can_come_from_the_environment_and_the_command_line_wins():
    env = {
        "GPUSPAWNER_SESSIONS_CATALOG": "/srv/catalog.yaml",
        "GPUSPAWNER_SESSIONS_INTERVAL": "45",
        "GPUSPAWNER_SESSIONS_AUDIT_LOG": "/srv/audit.jsonl",
        "GPUSPAWNER_SESSIONS_DRY_RUN": "yes",
    }
    args = build_parser(env).parse_args([])
    assert (args.catalog, args.interval, args.audit_log, args.dry_run) == (
        "/srv/catalog.yaml",
        45.0,
        "/srv/audit.jsonl",
        True,
    )
    args = build_parser(env).parse_args(["--catalog", "/other", "--interval", "5"])
    assert (args.catalog, args.interval) == ("/other", 5.0)
    defaults = build_parser({}).parse_args(["--catalog", "/c"])
    assert (defaults.interval, defaults.audit_log, defaults.dry_run) == (30.0, None, False)


def test_a_bad_interval_is_refused_with_a_sentence(capsys):
    with pytest.raises(SystemExit):
        build_parser({}).parse_args(["--catalog", "/c", "--interval", "soon"])
    assert "expected a number of seconds above 0, got 'soon'" in capsys.readouterr().err
