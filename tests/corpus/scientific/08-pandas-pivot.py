# expect: pivot (2, 2)
import pandas as pd
df = pd.DataFrame({"r": ["x", "x", "y", "y"], "c": ["p", "q", "p", "q"], "v": [1, 2, 3, 4]})
print("pivot", df.pivot_table(index="r", columns="c", values="v").shape)
