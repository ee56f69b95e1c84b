# expect: nodes 4
import networkx as nx
g = nx.DiGraph([(1, 2), (2, 3), (3, 1), (4, 1)])
pr = nx.pagerank(g)
print("nodes", len(pr))
