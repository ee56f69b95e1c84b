# expect: integral 0.3333
from scipy import integrate
v, _ = integrate.quad(lambda x: x * x, 0, 1)
print(f"integral {v:.4f}")
