# expect: median 3
import json, statistics
data = json.loads("[5, 1, 3, 2, 4]")
print("median", statistics.median(data))
