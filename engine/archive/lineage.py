"""Lineage of harnesses and checkpoints as networkx DAGs (edges point parent -> child)."""
from __future__ import annotations

import networkx as nx

from engine.sorting import natural_key


def harness_dag(archive) -> nx.DiGraph:
    g = nx.DiGraph()
    for h in archive.query("SELECT id, name, interface, creator, round FROM harnesses"):
        g.add_node(h["id"], **h)
    for e in archive.query("SELECT parent, child, position FROM harness_parents"):
        g.add_edge(e["parent"], e["child"], position=e["position"])
    return g


def checkpoint_dag(archive) -> nx.DiGraph:
    g = nx.DiGraph()
    for c in archive.query("SELECT id, name, kind, harness_id, dataset_id, round FROM checkpoints"):
        g.add_node(c["id"], **c)
    for e in archive.query("SELECT parent, child, role FROM checkpoint_parents"):
        g.add_edge(e["parent"], e["child"], role=e["role"])
    return g


def lowest_common_ancestor(dag: nx.DiGraph, nodes: list[str]) -> str | None:
    """The deepest node that is an ancestor-or-self of every given node (the natural TIES base)."""
    common = None
    for n in nodes:
        anc = nx.ancestors(dag, n) | {n}
        common = anc if common is None else common & anc
    if not common:
        return None
    # deepest = the one with the most ancestors of its own
    return max(common, key=lambda n: (len(nx.ancestors(dag, n)), n))


def layered_positions(dag: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """A layered layout: generation g of the DAG on row g, top to bottom. Linear in the graph's size
    (spring or dot layouts take seconds at hundreds of nodes)."""
    layered = nx.DiGraph()
    for depth, generation in enumerate(nx.topological_generations(dag)):
        for node in sorted(generation, key=natural_key):
            layered.add_node(node, layer=depth)
    if not layered:
        return {}
    pos = nx.multipartite_layout(layered, subset_key="layer", align="horizontal", scale=1.0)
    return {n: (float(x), float(y)) for n, (x, y) in pos.items()}


def neighbourhood(dag: nx.DiGraph, node: str, hops: int) -> set[str]:
    """The nodes within `hops` edges of `node`, in either direction."""
    return set(nx.ego_graph(dag.to_undirected(as_view=True), node, radius=hops))

