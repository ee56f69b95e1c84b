# expect: mean 4.5 std 2.87
import numpy as np
a = np.arange(10)
print(f"mean {a.mean()} std {a.std():.2f}")
