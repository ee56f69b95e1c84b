# expect: rows 3 sum 6
import sqlite3
db = sqlite3.connect(":memory:")
db.execute("create table t (v integer)")
db.executemany("insert into t values (?)", [(1,), (2,), (3,)])
n, s = db.execute("select count(*), sum(v) from t").fetchone()
print("rows", n, "sum", s)
