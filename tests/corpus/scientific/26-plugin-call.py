# expect: sum 7
import numpy as np
total = calculate_sum(int(np.int64(3)), 4)
print("sum", total)
