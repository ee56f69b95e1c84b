```python
# Code in the style an LLM writes for one round: tools, a behavior, a caught
# plugin failure, then an agent method that hands the round back to the AI.
import json

total = calculate_sum(19, 23)
now = get_current_time()
print(f"19 + 23 = {total}, computed at {now['iso']}")

confirmation = send_channel_message(text=f"The answer is {total}.")
print("channel:", confirmation)

# The notes plugin keeps them in the plugin store: a later run (or a later
# process) recalls them.
count = remember(f"19 + 23 = {total}")
print(f"notes kept for this user: {count}; the last: {recall('19 + 23')[-1]!r}")

try:
    calculate_sum(2**62, 2**62)
except PluginError as e:
    print("calc refused:", e)

summary = {"total": total, "unix": now["unix"] > 0}
print(json.dumps(summary, sort_keys=True))

# An agent method: the script stops here and the passages go to the AI.
search_knowledge_base("how does fuel limit cpu time", max_results=2)
print("this line never runs")
```
