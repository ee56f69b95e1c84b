# The scientific interpreter: a chart drawn with pandas and matplotlib, kept
# in the chat's workspace (the working directory) and posted to the channel
# by a plugin, which gets the file's bytes.
import pandas as pd

sales = pd.DataFrame({"month": ["Jan", "Feb", "Mar", "Apr"], "units": [120, 135, 160, 150]})
ax = sales.plot.bar(x="month", y="units", legend=False, title="Units sold")
ax.figure.savefig("units.png")
print(sales["units"].describe()[["mean", "max"]].to_string())
print(send_channel_image(open("units.png", "rb").read(), "Units sold, January to April"))
