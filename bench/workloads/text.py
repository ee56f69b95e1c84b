import re

text = (
    "Order #1042 from alice@example.com shipped on 2026-11-02 for $56.78; "
    "bob@test.org asked about order #1043 (3 items, $12.50) and the quick "
    "brown fox jumps over the lazy dog before the deadline. "
) * 10
emails = re.findall(r"[\w.]+@[\w]+\.\w+", text)
amounts = re.findall(r"\$(\d+\.\d\d)", text)
words = re.findall(r"[a-z]+", text.lower())
counts = {}
for word in words:
    counts[word] = counts.get(word, 0) + 1
top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
print(len(text), len(emails), round(sum(float(a) for a in amounts), 2), len(words), top)
