# expect: sum 30
import numpy as np
# numpy scalars cross as their Python values.
print("sum", calculate_sum(np.int64(10), np.int64(20)))
