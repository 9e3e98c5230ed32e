# defines: draws of CPython's own random.Random for lmforge's PythonRandom test: per seed, one line of
#   "<seed> r:<random() as float.hex>... i:<randint>... s:<shuffle of range(20)>".
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
    print(' '.join(out))
