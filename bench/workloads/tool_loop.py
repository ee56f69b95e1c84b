total = 0
for i in range(50):
    total = calculate_sum(total, i)
print(total)
