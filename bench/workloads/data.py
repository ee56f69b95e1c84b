import json

records = [
    {
        "id": i,
        "name": f"user{i}",
        "team": ["red", "green", "blue", "gold", "gray"][i % 5],
        "score": (i * 37) % 101,
        "active": i % 3 != 0,
    }
    for i in range(300)
]
rows = json.loads(json.dumps(records))
active = [r for r in rows if r["active"] and r["score"] >= 20]
active.sort(key=lambda r: (-r["score"], r["id"]))
teams = {}
for r in active:
    team = teams.setdefault(r["team"], {"n": 0, "total": 0})
    team["n"] += 1
    team["total"] += r["score"]
summary = {name: round(t["total"] / t["n"], 2) for name, t in sorted(teams.items())}
print(len(active), active[0]["name"], json.dumps(summary))
