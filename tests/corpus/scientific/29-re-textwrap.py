# expect: ['2026', '11', '26']
import re, textwrap
print(re.findall(r"\d+", textwrap.dedent("  2026-11-26")))
