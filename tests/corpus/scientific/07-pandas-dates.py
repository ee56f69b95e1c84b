# expect: 2026-01-31
import pandas as pd
s = pd.date_range("2026-01-01", periods=3, freq="ME")
print(s[0].date())
