def calculate_sum(num1, num2):
    """The calc plugin's `calculate_sum`, for the peers: a 64-bit sum."""
    total = num1 + num2
    if not -(2**63) <= total < 2**63:
        raise OverflowError(f"{num1} + {num2} overflows a 64-bit integer")
    return total
