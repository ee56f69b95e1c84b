# expect: x**3/3
import sympy as sp
x = sp.Symbol("x")
print(sp.integrate(x**2, x))
