# expect: size (64, 32)
import io
from PIL import Image, ImageDraw
img = Image.new("RGB", (64, 32), "white")
ImageDraw.Draw(img).rectangle([4, 4, 20, 20], fill="red")
buf = io.BytesIO()
img.save(buf, format="PNG")
print("size", Image.open(io.BytesIO(buf.getvalue())).size)
