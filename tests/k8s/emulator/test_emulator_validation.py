"""Names, labels and data keys are refused with 422 Invalid as the API server refuses them."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.support.k8s_cluster import status_body
from tests.support.k8s_manifests import pod


async def refused(call: Any) -> dict[str, Any]:
    with pytest.raises(client.ApiException) as raised:
        await call
    assert raised.value.status == 422
    body = status_body(raised.value)
    assert body["reason"] == "Invalid"
    return body


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


@pytest.mark.parametrize(
    ("kind", "name", "accepted"),
    [
        ("pod", "jupyter-ada.lovelace", True),  # a DNS-1123 subdomain may have dots
        ("pod", "Jupyter-Ada", False),
        ("pod", "jupyter-" + "a" * 250, False),  # over 253 characters
        ("configmap", "job-1.notebook", True),
        ("configmap", "job_1", False),
        ("service", "jupyter-ada", True),
        ("service", "1ada", False),  # a DNS-1035 label starts with a letter
        ("service", "jupyter.ada", False),
        ("namespace", "1course", True),  # a DNS-1123 label may start with a digit
        ("namespace", "course.2026", False),
    ],
)
async def test_object_names_follow_their_kinds_rule(k8s_api, kind, name, accepted):
    core = client.CoreV1Api(k8s_api)
    create = {
        "pod": lambda: core.create_namespaced_pod("default", pod(name)),
        "configmap": lambda: core.create_namespaced_config_map(
            "default", {"metadata": {"name": name}}
        ),
        "service": lambda: core.create_namespaced_service(
            "default", {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}}
        ),
        "namespace": lambda: core.create_namespace({"metadata": {"name": name}}),
    }[kind]
    if accepted:
        await create()
        return
    body = await refused(create())
    kind_name = {"pod": "Pod", "configmap": "ConfigMap", "service": "Service"}.get(
        kind, "Namespace"
    )
    assert body["message"].startswith(f'{kind_name} "{name}" is invalid: metadata.name: ')
    assert [field for field, _ in causes(body)] == ["metadata.name"]


async def test_a_service_name_starting_with_a_digit_gets_the_dns_1035_message(k8s_api):
    core = client.CoreV1Api(k8s_api)
    body = await refused(
        core.create_namespaced_service(
            "default", {"metadata": {"name": "1ada"}, "spec": {"ports": [{"port": 80}]}}
        )
    )
    assert body["message"].startswith(
        'Service "1ada" is invalid: metadata.name: Invalid value: "1ada": a DNS-1035 label must consist of lower case alphanumeric characters'
    )


async def test_label_keys_and_values_are_checked(k8s_api):
    core = client.CoreV1Api(k8s_api)
    manifest = pod("labelled", labels={"hub.jupyter.org/user": "ada@example.edu"})
    body = await refused(core.create_namespaced_pod("default", manifest))
    assert causes(body)[0][0] == "metadata.labels"
    assert 'Invalid value: "ada@example.edu": a valid label must be' in causes(body)[0][1]
    manifest = pod("labelled", labels={"Bad_Prefix/user": "ada"})
    body = await refused(core.create_namespaced_pod("default", manifest))
    assert "prefix part a lowercase RFC 1123 subdomain" in causes(body)[0][1]


async def test_config_map_keys_must_be_file_names_the_kubelet_can_write(k8s_api):
    core = client.CoreV1Api(k8s_api)
    body = await refused(
        core.create_namespaced_config_map(
            "default",
            {"metadata": {"name": "job-1"}, "data": {"my notebook.ipynb": "{}", "..data": "x"}},
        )
    )
    assert causes(body) == [
        (
            "data[my notebook.ipynb]",
            "Invalid value: \"my notebook.ipynb\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        ),
        ("data[..data]", "Invalid value: \"..data\": must not start with '..'"),
    ]
    body = await refused(
        core.create_namespaced_config_map(
            "default",
            {
                "metadata": {"name": "job-1"},
                "data": {"input.ipynb": "{}"},
                "binaryData": {"input.ipynb": base64.b64encode(b"{}").decode()},
            },
        )
    )
    assert causes(body) == [
        (
            "binaryData[input.ipynb]",
            'Invalid value: "input.ipynb": duplicate of key present in data',
        )
    ]


async def test_config_maps_and_secrets_hold_at_most_one_mebibyte(k8s_api):
    core = client.CoreV1Api(k8s_api)
    just_fits = "x" * (1024 * 1024 - 2)
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "fits"}, "data": {"a": just_fits, "b": "yz"}}
    )
    body = await refused(
        core.create_namespaced_config_map(
            "default",
            {
                "metadata": {"name": "too-big"},
                "binaryData": {"input.ipynb": base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()},
            },
        )
    )
    assert body["message"] == (
        'ConfigMap "too-big" is invalid: : Too long: must have at most 1048576 bytes'
    )
    body = await refused(
        core.create_namespaced_secret(
            "default",
            {"metadata": {"name": "big-secret"}, "stringData": {"token": "x" * (1024 * 1024 + 1)}},
        )
    )
    assert causes(body) == [("", "Too long: must have at most 1048576 bytes")]
