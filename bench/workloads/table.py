rows = ["region,product,units,price"]
for i in range(200):
    region = ["north", "south", "east", "west"][i % 4]
    product = ["widget", "gadget", "doohickey"][i % 3]
    rows.append(f"{region},{product},{(i * 7) % 23 + 1},{(i * 13) % 50 + 0.99:.2f}")
csv_text = "\n".join(rows)

lines = csv_text.strip().split("\n")
header = lines[0].split(",")
sales = [dict(zip(header, line.split(","))) for line in lines[1:]]
totals = {}
for sale in sales:
    key = (sale["region"], sale["product"])
    revenue = int(sale["units"]) * float(sale["price"])
    entry = totals.setdefault(key, [0, 0.0])
    entry[0] += int(sale["units"])
    entry[1] += revenue
report = ["| region | product | units | revenue |", "| --- | --- | ---: | ---: |"]
for (region, product), (units, revenue) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
    report.append(f"| {region} | {product} | {units} | {revenue:,.2f} |")
print(len(sales), len(report), report[2])
