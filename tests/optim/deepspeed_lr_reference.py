"""An independent re-statement of DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR
(deepspeed/runtime/lr_schedules.py) driven as DeepSpeed's engine drives them: the scheduler is built with
last_batch_iteration = -1 (which puts get_lr() of iteration -1 into the optimizer), each optimizer step runs with
the optimizer's current lr, and scheduler.step() follows every optimizer step.

usage: deepspeed_lr_reference.py TYPE STEPS key=value ...   -> one lr per optimizer step, repr() floats
"""
import math
import sys


class Group(dict):
    pass


class WarmupLR:
    def __init__(self, groups, warmup_min_lr=0.0, warmup_max_lr=0.001, warmup_num_steps=1000, warmup_type="log"):
        self.groups = groups
        self.min_lr = warmup_min_lr
        self.delta = warmup_max_lr - warmup_min_lr
        self.W = max(2, warmup_num_steps)
        self.kind = warmup_type
        self.inv_log = 1.0 / math.log(self.W)
        self.it = -1
        self._apply()

    def warm(self):
        if self.kind == "log":
            return self.inv_log * math.log(self.it + 1)
        return self.it / self.W

    def gamma(self):
        return self.warm() if self.it < self.W else 1.0

    def lr(self):
        if self.it < 0:
            return self.min_lr
        return self.min_lr + self.delta * self.gamma()

    def _apply(self):
        for g in self.groups:
            g["lr"] = self.lr()

    def step(self):
        self.it += 1
        self._apply()


class WarmupDecayLR(WarmupLR):
    def __init__(self, groups, total_num_steps, **kw):
        self.T = total_num_steps
        super().__init__(groups, **kw)

    def gamma(self):
        if self.it < self.W:
            return self.warm()
        return max(0.0, float(self.T - self.it) / float(max(1.0, self.T - self.W)))


class WarmupCosineLR:
    def __init__(self, groups, total_num_steps, warmup_min_ratio=0.0, warmup_num_steps=1000, cos_min_ratio=0.0001,
                 warmup_type="log"):
        self.groups = groups
        self.T = total_num_steps
        self.min_ratio = warmup_min_ratio
        self.cos_min = cos_min_ratio
        self.W = max(2, warmup_num_steps)
        self.kind = warmup_type
        self.inv_log = 1.0 / math.log(self.W)
        self.org = [g["lr"] for g in groups]
        self.it = -1
        self._apply()

    def ratio(self):
        if self.it < self.W:
            r = self.inv_log * math.log(self.it + 1) if self.kind == "log" else self.it / self.W
            return self.min_ratio + r * (1.0 - self.min_ratio)
        real_last = self.it - self.W + 1
        real_total = self.T - self.W
        r = (1 + math.cos(math.pi * real_last / real_total)) / 2
        return max(0.0, self.cos_min + (1.0 - self.cos_min) * r)

    def _apply(self):
        for g, org in zip(self.groups, self.org):
            g["lr"] = 0.0 if self.it < 0 else org * self.ratio()

    def step(self):
        self.it += 1
        self._apply()


def main():
    kind, steps = sys.argv[1], int(sys.argv[2])
    kw = {}
    for arg in sys.argv[3:]:
        k, v = arg.split("=", 1)
        kw[k] = v if k == "warmup_type" else (int(v) if k in ("warmup_num_steps", "total_num_steps") else float(v))
    lr = kw.pop("lr", 0.0)
    groups = [Group(lr=lr)]
    sched = {"WarmupLR": WarmupLR, "WarmupDecayLR": WarmupDecayLR, "WarmupCosineLR": WarmupCosineLR}[kind](groups, **kw)
    for _ in range(steps):
        print(repr(groups[0]["lr"]))  # the optimizer step runs with this
        sched.step()


main()
