def primes_below(n):
    primes = []
    for k in range(2, n):
        for p in primes:
            if p * p > k:
                primes.append(k)
                break
            if k % p == 0:
                break
        else:
            primes.append(k)
    return primes


primes = primes_below(3000)
print(len(primes), primes[-1], sum(primes))
