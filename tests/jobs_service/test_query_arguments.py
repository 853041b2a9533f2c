"""Query strings as JupyterLab sends them."""

from __future__ import annotations

from jupyter_to_job.rest import query_arguments


def test_jupyterlabs_cache_buster_is_not_taken_for_a_field():
    # Given JupyterLab's default GET settings, which add a bare timestamp to the query
    arguments = {"status": [b"RUNNING"], "1795242130032": [b""], "name": [b"a", b"b"]}
    # Then the timestamp is dropped and the real fields are kept (the last value wins)
    assert query_arguments(arguments) == {"status": "RUNNING", "name": "b"}
