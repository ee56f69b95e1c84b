# expect: [('a', 3), ('b', 2)]
from collections import Counter
print(Counter("aaabbc").most_common(2))
