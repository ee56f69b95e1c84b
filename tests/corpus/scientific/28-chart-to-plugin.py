# expect: sent
import io
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [2, 4, 1])
buf = io.BytesIO()
fig.savefig(buf, format="png")
plt.close(fig)
print("sent" if len(buf.getvalue()) > 1000 else "empty")
