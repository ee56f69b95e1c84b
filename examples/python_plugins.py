# AI-style code calling the example Python plugins (sdk/python/examples).
clear_memos()
save_memo("Ada prefers tea.")
print("memos:", save_memo("Ada's next talk is on Friday."))
print(list_memos())
print(roll_dice("find the secret door", 12))
show_dice(3, 6)  # a multimodal agent: the script stops, the dice go to the AI
