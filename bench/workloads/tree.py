def make(depth, width, label):
    if depth == 0:
        return {"id": label, "size": sum(int(c) for c in label if c.isdigit()), "tags": ["leaf", label[-1]]}
    return {
        "id": label,
        "children": [make(depth - 1, width, f"{label}.{i}") for i in range(width)],
    }


def walk(node, path, out):
    here = path + [node["id"]]
    if "children" in node:
        for child in node["children"]:
            walk(child, here, out)
    else:
        out.append(("/".join(here), node["size"], node["tags"]))
    return out


tree = make(4, 4, "root")
leaves = walk(tree, [], [])
largest = max(leaves, key=lambda leaf: leaf[1])
by_tag = {}
for _, size, tags in leaves:
    for tag in tags:
        by_tag[tag] = by_tag.get(tag, 0) + size
print(len(leaves), largest[0], sorted(by_tag.items())[:3])
