# expect: count    5.0
import pandas as pd
print(pd.Series([1, 2, 3, 4, 5], dtype=float).describe())
