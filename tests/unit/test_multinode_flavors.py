"""Scenarios: an admin describes a job flavor that runs on several nodes (``gpu.nodes``), and
the catalog takes it, or says at the field's line what is wrong with it."""

from __future__ import annotations

import pytest

from gpuspawner.policy import CatalogError, load_catalog


def problems(write_yaml, text: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(CatalogError) as raised:
        load_catalog(write_yaml(text))
    return [(p.line, p.field, p.message) for p in raised.value.problems]


def test_a_flavor_of_two_nodes_of_two_gpus_holds_four_gpus(write_yaml):
    # Given a flavor of two pods with two whole GPUs each
    catalog = load_catalog(
        write_yaml(
            """\
flavors:
  - id: two-by-two
    title: Four GPUs on two nodes
    gpu: {count: 2, nodes: 2}
  - id: one-node
    title: Two GPUs on one node
    gpu: {count: 2}
"""
        )
    )
    # Then it runs on two nodes, with four GPUs in all; a flavor without nodes on one
    big, small = catalog.flavors
    assert (big.nodes, big.gpu.total_gpus, big.share.count) == (2, 4, 2)
    assert (small.nodes, small.gpu.total_gpus) == (1, 2)


def test_several_nodes_of_a_gpu_slice_are_refused_at_the_nodes_line(write_yaml):
    found = problems(
        write_yaml,
        """\
flavors:
  - id: sliced
    title: Slices everywhere
    gpu:
      fraction: 1/2
      nodes: 2
""",
    )
    assert len(found) == 1
    line, field, message = found[0]
    assert (line, field) == (6, "flavors[0].gpu.nodes")
    assert "takes whole GPUs on each of them" in message and "give count" in message


@pytest.mark.parametrize("nodes", [0, 65])
def test_a_number_of_nodes_out_of_range_is_refused(write_yaml, nodes):
    found = problems(
        write_yaml,
        f"""\
flavors:
  - id: wrong
    title: Wrong
    gpu: {{count: 1, nodes: {nodes}}}
""",
    )
    assert [(line, field) for line, field, _ in found] == [(4, "flavors[0].gpu.nodes")]


def test_a_server_profile_on_several_nodes_is_refused_saying_it_is_for_jobs(write_yaml):
    found = problems(
        write_yaml,
        """\
standing:
  - id: big-server
    title: Big server
    gpu: {count: 2, nodes: 2}
""",
    )
    assert len(found) == 1
    line, field, message = found[0]
    assert field == "standing[0].gpu.nodes"
    assert "a server runs on one node" in message and "job flavors only" in message


TWO_NODE_CATALOG = """\
flavors:
  - id: one-node
    title: Two GPUs on one node
    gpu: {count: 2}
  - id: two-by-two
    title: Four GPUs on two nodes
    gpu:
      count: 2
      nodes: 2
"""


def test_gpuspawner_check_refuses_a_flavor_on_several_nodes_for_one_machine(write_yaml, capsys):
    from gpuspawner.cli import main

    # Given a catalog with a flavor on two nodes, checked for a hub on one machine
    path = write_yaml(TWO_NODE_CATALOG)
    code = main(
        ["check", str(path), "--hub-config", str(write_yaml("c = get_config()\n", "hub.py"))]
    )
    # Then it is refused at the flavor's nodes line, saying why
    err = capsys.readouterr().err
    assert code == 1
    assert (
        f"{path}:9: flavors[1].gpu.nodes: asks for 2 nodes, but a job on 2 nodes needs jobs to "
        "run on Kubernetes: on one machine a job runs as one process on that machine, so it "
        "cannot span several nodes"
    ) in err
    assert "one-node" not in err


def test_gpuspawner_check_takes_it_for_kubernetes_nodes(write_yaml, capsys):
    from gpuspawner.cli import main

    path = write_yaml(TWO_NODE_CATALOG)
    assert main(["check", str(path), "--gpu-memory", "80GiB"]) == 0
    assert "nodes" not in capsys.readouterr().err
