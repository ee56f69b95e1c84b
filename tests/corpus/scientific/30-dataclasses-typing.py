# expect: Point(x=1, y=2)
from dataclasses import dataclass
@dataclass
class Point:
    x: int
    y: int
print(Point(1, 2))
