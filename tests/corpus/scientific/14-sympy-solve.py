# expect: [-2, 2]
import sympy as sp
x = sp.Symbol("x")
print(sorted(sp.solve(x**2 - 4, x)))
