#!/usr/bin/env python3
"""Convert an edge-consensus node list in JSON (the layout of the ECL-ISVR
reference's conf/node_list*.json) into a dtrain graph file.

    tools/ecl-graph.py node_list.json > graph.txt

Input: {"nodes": {"node0": {"round": K, "edges": {"node6": 2, ...}}, ...}}:
per node its cycle K and, per neighbour, the phase at which this node
starts the swap. Nodes become ranks 0, 1, ... in the order they are listed
(the order that also fixes the signs A_ij). Output: 'round K' and one line
'I J PI PJ' per edge (I < J; PI, PJ: the phases of the ends at I and J), the
format of algorithm.graph_file for the edge-consensus modes.
"""
import json
import sys


def convert(doc, src):
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, dict) or not nodes:
        raise ValueError(f"{src}: expected an object with a non-empty 'nodes' object")
    names = list(nodes)
    rank = {name: i for i, name in enumerate(names)}
    rounds = {nodes[n].get("round") for n in names}
    if len(rounds) != 1 or not isinstance(next(iter(rounds)), int) or next(iter(rounds)) < 1:
        raise ValueError(f"{src}: every node needs the same integer 'round' >= 1, found {sorted(map(str, rounds))}")
    K = rounds.pop()
    lines = [f"# converted from {src}: {len(names)} ranks ({', '.join(names)})", f"round {K}"]
    for a in names:
        edges = nodes[a].get("edges", {})
        for b, phase in edges.items():
            if b not in rank:
                raise ValueError(f"{src}: node {a} has an edge to unknown node {b}")
            back = nodes[b].get("edges", {})
            if a not in back:
                raise ValueError(f"{src}: edge {a} -> {b} has no partner {b} -> {a}")
            for p, who in ((phase, a), (back[a], b)):
                if not isinstance(p, int) or not 0 <= p < K:
                    raise ValueError(f"{src}: node {who}: phase {p!r} outside 0..{K - 1}")
            if rank[a] < rank[b]:
                lines.append(f"{rank[a]} {rank[b]} {phase} {back[a]}")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    try:
        with open(argv[1]) as f:
            doc = json.load(f)
        sys.stdout.write(convert(doc, argv[1]))
    except (OSError, ValueError) as e:
        sys.stderr.write(f"ecl-graph.py: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
