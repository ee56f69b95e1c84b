# expect: 499999500000
import numpy as np
# numpy's default integer is 32-bit on wasm32: say 64 bits for large sums.
print(np.arange(1_000_000, dtype=np.int64).sum())
