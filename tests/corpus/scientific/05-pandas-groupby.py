# expect: a    4
import pandas as pd
df = pd.DataFrame({"k": ["a", "b", "a", "b"], "v": [1, 2, 3, 4]})
print(df.groupby("k")["v"].sum())
