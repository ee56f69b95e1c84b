# expect: 0.3
from decimal import Decimal
print(Decimal("0.1") + Decimal("0.2"))
