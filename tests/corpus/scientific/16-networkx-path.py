# expect: ['a', 'b', 'd']
import networkx as nx
g = nx.Graph()
g.add_edges_from([("a", "b"), ("b", "d"), ("a", "c"), ("c", "e"), ("e", "d")])
print(nx.shortest_path(g, "a", "d"))
