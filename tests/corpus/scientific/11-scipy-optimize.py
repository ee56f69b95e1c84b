# expect: root 1.4142
from scipy import optimize
r = optimize.brentq(lambda x: x * x - 2, 0, 2)
print(f"root {r:.4f}")
