# expect: ['b', '2']
import csv, io
rows = list(csv.reader(io.StringIO("a,1\nb,2\n")))
print(rows[1])
