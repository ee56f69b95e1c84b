# expect: 2:00:00
import datetime
from zoneinfo import ZoneInfo
t = datetime.datetime(2026, 7, 1, 12, tzinfo=ZoneInfo("Europe/Paris"))
print(t.utcoffset())
