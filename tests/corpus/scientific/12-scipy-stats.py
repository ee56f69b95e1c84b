# expect: p < 0.05 True
import numpy as np
from scipy import stats
a = np.array([1.0, 2.0, 3.0, 4.0, 5.0] * 4)
b = a + 3
t, p = stats.ttest_ind(a, b)
print("p < 0.05", bool(p < 0.05))
