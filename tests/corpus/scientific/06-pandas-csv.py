# expect: total 60
import io
import pandas as pd
csv = "name,amount\nx,10\ny,20\nz,30\n"
df = pd.read_csv(io.StringIO(csv))
print("total", df["amount"].sum())
