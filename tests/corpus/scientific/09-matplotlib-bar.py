# expect: png
import io
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.bar(["a", "b", "c"], [3, 1, 2])
buf = io.BytesIO()
fig.savefig(buf, format="png")
plt.close(fig)
print("png" if buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n" else "not png")
