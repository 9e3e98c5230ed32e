# defines: a transcription of fairseq's PolynomialDecayLRSchedule (fairseq/optim/lr_scheduler/
# polynomial_decay_schedule.py) driven as fairseq's Trainer drives it (step_update(0) when the optimizer is built,
# step_update(num_updates) after every update), for tests/optim/test_fairseq_polynomial.cpp.
# Usage: fairseq_polynomial_reference.py OUT_FILE
# Writes per case a line "case lr=.. end=.. power=.. warmup=.. total=.. updates=.." then one line per update with
# the learning rate that update runs with (repr floats).
import sys


class FakeOptimizer:
    def __init__(self):
        self.lr = None

    def set_lr(self, lr):
        self.lr = lr

    def get_lr(self):
        return self.lr


class PolynomialDecayLRSchedule:
    """fairseq's, term for term (cfg fields as attributes)."""

    def __init__(self, lr, warmup_updates, end_learning_rate, power, total_num_update, optimizer):
        assert total_num_update > 0
        self.optimizer = optimizer
        self.warmup_updates = warmup_updates
        self.lr = lr[0]
        if warmup_updates > 0:
            self.warmup_factor = 1.0 / warmup_updates
        else:
            self.warmup_factor = 1
        self.end_learning_rate = end_learning_rate
        self.total_num_update = total_num_update
        self.power = power
        self.optimizer.set_lr(self.warmup_factor * self.lr)

    def step_update(self, num_updates):
        if self.warmup_updates > 0 and num_updates <= self.warmup_updates:
            self.warmup_factor = num_updates / float(self.warmup_updates)
            lr = self.warmup_factor * self.lr
        elif num_updates >= self.total_num_update:
            lr = self.end_learning_rate
        else:
            warmup = self.warmup_updates
            lr_range = self.lr - self.end_learning_rate
            pct_remaining = 1 - (num_updates - warmup) / (self.total_num_update - warmup)
            lr = lr_range * pct_remaining ** (self.power) + self.end_learning_rate
        self.optimizer.set_lr(lr)
        return self.optimizer.get_lr()


CASES = [
    dict(lr=5e-4, end=0.0, power=1.0, warmup=10, total=100, updates=110),
    dict(lr=1e-3, end=1e-5, power=2.0, warmup=7, total=50, updates=60),
    dict(lr=0.0001, end=0.0, power=0.5, warmup=0, total=33, updates=40),
    dict(lr=6e-3, end=2e-4, power=1.7, warmup=3, total=4, updates=9),
    dict(lr=3e-4, end=0.0, power=1.0, warmup=1, total=1000000, updates=20),
]

with open(sys.argv[1], "w") as out:
    for c in CASES:
        out.write("case " + " ".join("%s=%r" % (k, v) for k, v in c.items()) + "\n")
        opt = FakeOptimizer()
        sched = PolynomialDecayLRSchedule([c["lr"]], c["warmup"], c["end"], c["power"], c["total"], opt)
        sched.step_update(0)  # Trainer._build_optimizer
        for update in range(1, c["updates"] + 1):
            out.write("%r\n" % opt.get_lr())  # the lr this update runs with
            sched.step_update(update)  # Trainer.set_num_updates after the update
