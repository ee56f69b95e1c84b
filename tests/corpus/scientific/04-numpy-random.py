# expect: shape (100, 3) ok
import numpy as np
rng = np.random.default_rng(42)
x = rng.normal(size=(100, 3))
print("shape", x.shape, "ok" if abs(x.mean()) < 0.5 else "odd")
