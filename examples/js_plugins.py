# AI-style code calling the example JavaScript and TypeScript plugins
# (sdk/js/examples): jotter keeps the user's notes in the store, sketch draws
# charts.
clear_jottings()
jot("Ada prefers tea.")
print("notes:", jot("Ada's next talk is on Friday."))
print(jottings())
print(post_bars([3, 1, 4, 1, 5], "Pi"))  # a tool: the chart goes to the chat
sketch_bars([2, 7, 1, 8], "e")  # a multimodal agent: the script stops, the chart goes to the AI
