# defines: draws of CPython's own random.Random for lmforge's PythonRandom test: per seed, one line of
#   "<seed> r:<random() as float.hex>... i:<randint>... s:<shuffle of range(20)> r:... h:<random() < 0.5 as 0/1>...
#   t:<n>:<shuffle of range(n)>...".
import random

for seed in (0, 1, 12345, 2**32 + 5, -7, 2**63 - 1):
    rng = random.Random(seed)
    out = [str(seed)]
    for _ in range(5):
        out.append('r:' + rng.random().hex())
    for a, b in ((0, 10), (2, 125), (0, 30521), (1, 1), (0, 0), (0, 2**32 - 1), (0, 2**32), (5, 2**40)):
        out.append('i:' + str(rng.randint(a, b)))
    x = list(range(20))
    rng.shuffle(x)
    out.append('s:' + ','.join(map(str, x)))
    out.append('r:' + rng.random().hex())
    for _ in range(8):  # the coin flips of truncate_seq_pair and of "random next" (PythonRandom::random_below_half)
        out.append('h:' + str(int(rng.random() < 0.5)))
    for n in (1, 2, 3, 129, 300):  # shuffles across several bit lengths of i + 1
        x = list(range(n))
        rng.shuffle(x)
        out.append('t:' + str(n) + ':' + ','.join(map(str, x)))
    print(' '.join(out))
