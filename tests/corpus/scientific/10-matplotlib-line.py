# expect: svg
import io
import numpy as np
import matplotlib.pyplot as plt
x = np.linspace(0, 6.28, 50)
plt.plot(x, np.sin(x))
plt.title("sine")
buf = io.StringIO()
plt.savefig(buf, format="svg")
print("svg" if "<svg" in buf.getvalue() else "no svg")
