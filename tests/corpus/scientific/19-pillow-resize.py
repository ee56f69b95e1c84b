# expect: thumb (16, 8)
from PIL import Image
img = Image.new("L", (160, 80), 128)
img.thumbnail((16, 16))
print("thumb", img.size)
