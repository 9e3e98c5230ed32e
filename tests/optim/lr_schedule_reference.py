# defines: a transcription of Megatron-LM's LR/weight-decay schedule (optimizer_param_scheduler.py and
# training.get_optimizer_param_scheduler, with arguments.py's checks) for tests/optim/test_lr_schedule.cpp.
# Usage: lr_schedule_reference.py OUT_FILE
# Writes per case a line "case key=value ..." then either "error" or one line per iteration
# "num_steps lr wd" with the lr/wd the optimizer uses at that iteration (repr floats).
import math
import sys


class OptimizerParamScheduler:
    def __init__(self, init_lr, max_lr, min_lr, lr_warmup_steps, lr_decay_steps, lr_decay_style,
                 start_wd, end_wd, wd_incr_steps, wd_incr_style):
        self.init_lr = init_lr
        self.max_lr = float(max_lr)
        self.min_lr = min_lr
        assert self.min_lr >= 0.0
        assert self.max_lr >= self.min_lr
        assert self.init_lr <= self.max_lr
        self.lr_warmup_steps = lr_warmup_steps
        self.num_steps = 0
        self.lr_decay_steps = lr_decay_steps
        assert self.lr_decay_steps > 0
        assert self.lr_warmup_steps < self.lr_decay_steps
        self.lr_decay_style = lr_decay_style
        self.start_wd = start_wd
        self.end_wd = end_wd
        assert self.start_wd >= 0.0
        assert self.end_wd >= self.start_wd
        self.wd_incr_steps = wd_incr_steps
        self.wd_incr_style = wd_incr_style
        self.step(0)

    def get_wd(self):
        if self.num_steps > self.wd_incr_steps:
            return self.end_wd
        if self.wd_incr_style == 'constant':
            assert self.start_wd == self.end_wd
            return self.end_wd
        incr_ratio = float(self.num_steps) / float(self.wd_incr_steps)
        assert 0.0 <= incr_ratio <= 1.0
        delta_wd = self.end_wd - self.start_wd
        if self.wd_incr_style == 'linear':
            coeff = incr_ratio
        elif self.wd_incr_style == 'cosine':
            coeff = 0.5 * (math.cos(math.pi * (1 - incr_ratio)) + 1.0)
        else:
            raise Exception('unknown wd style')
        return self.start_wd + coeff * delta_wd

    def get_lr(self):
        max_lr, min_lr = self.max_lr, self.min_lr
        if self.lr_warmup_steps > 0 and self.num_steps <= self.lr_warmup_steps:
            return self.init_lr + ((max_lr - self.init_lr) * float(self.num_steps) / float(self.lr_warmup_steps))
        if self.lr_decay_style == 'constant':
            return max_lr
        if self.num_steps > self.lr_decay_steps:
            return min_lr
        if self.lr_decay_style == 'inverse-square-root':
            warmup_steps = max(self.lr_warmup_steps, 1)
            num_steps = max(self.num_steps, 1)
            lr = max_lr * warmup_steps ** 0.5 / (num_steps ** 0.5)
            return max(min_lr, lr)
        num_steps_ = self.num_steps - self.lr_warmup_steps
        decay_steps_ = self.lr_decay_steps - self.lr_warmup_steps
        decay_ratio = float(num_steps_) / float(decay_steps_)
        assert 0.0 <= decay_ratio <= 1.0
        delta_lr = max_lr - min_lr
        if self.lr_decay_style == 'linear':
            coeff = 1.0 - decay_ratio
        elif self.lr_decay_style == 'cosine':
            coeff = 0.5 * (math.cos(math.pi * decay_ratio) + 1.0)
        else:
            raise Exception('unknown decay style')
        return min_lr + coeff * delta_lr

    def step(self, increment):
        self.num_steps += increment
        self.lr = self.get_lr()
        self.wd = self.get_wd()


def build(a):
    """training.get_optimizer_param_scheduler with arguments.py's validation of these flags."""
    wd = a.get('weight_decay', 0.01)
    start_wd = a.get('start_weight_decay', wd)
    end_wd = a.get('end_weight_decay', wd)
    gbs = a['global_batch_size']
    frac = a.get('lr_warmup_fraction')
    if a.get('train_iters'):
        assert a.get('train_samples') is None
        assert a.get('lr_decay_samples') is None
        assert a.get('lr_warmup_samples', 0) == 0
        if frac is not None:
            assert a.get('lr_warmup_iters', 0) == 0
        lr_decay_iters = a.get('lr_decay_iters', a['train_iters'])
        lr_decay_steps = lr_decay_iters * gbs
        wd_incr_steps = a['train_iters'] * gbs
        lr_warmup_steps = frac * lr_decay_steps if frac is not None else a.get('lr_warmup_iters', 0) * gbs
    elif a.get('train_samples'):
        assert a.get('lr_decay_iters') is None
        assert a.get('lr_warmup_iters', 0) == 0
        if frac is not None:
            assert a.get('lr_warmup_samples', 0) == 0
        lr_decay_steps = a.get('lr_decay_samples', a['train_samples'])
        wd_incr_steps = a['train_samples']
        lr_warmup_steps = frac * lr_decay_steps if frac is not None else a.get('lr_warmup_samples', 0)
    else:
        raise AssertionError('either train-iters or train-samples')
    return OptimizerParamScheduler(a.get('lr_warmup_init', 0.0), a['lr'], a.get('min_lr', 0.0), lr_warmup_steps,
                                   lr_decay_steps, a.get('lr_decay_style', 'linear'), start_wd, end_wd,
                                   wd_incr_steps, a.get('weight_decay_incr_style', 'constant'))


CASES = [
    dict(lr=6e-4, min_lr=6e-5, lr_decay_style='cosine', train_iters=50, lr_warmup_iters=5, global_batch_size=8),
    dict(lr=6e-4, min_lr=6e-5, lr_decay_style='cosine', train_iters=60, lr_decay_iters=40, lr_warmup_iters=4,
         global_batch_size=3),
    dict(lr=1e-3, lr_decay_style='linear', train_iters=30, global_batch_size=4),  # no warm-up: first lr is the peak
    dict(lr=1e-3, min_lr=1e-4, lr_decay_style='linear', train_iters=30, lr_warmup_fraction=0.1, global_batch_size=7),
    dict(lr=2e-4, lr_decay_style='constant', train_iters=25, lr_warmup_iters=10, global_batch_size=2),
    dict(lr=2e-4, lr_decay_style='constant', train_iters=12, global_batch_size=5),
    dict(lr=5e-4, min_lr=1e-5, lr_decay_style='inverse-square-root', train_iters=80, lr_warmup_iters=10,
         global_batch_size=4),
    dict(lr=5e-4, min_lr=2e-4, lr_decay_style='inverse-square-root', train_iters=80, lr_decay_iters=50,
         global_batch_size=1),
    dict(lr=3e-4, min_lr=3e-5, lr_decay_style='cosine', train_samples=1000, lr_warmup_samples=100,
         lr_decay_samples=800, global_batch_size=16),
    dict(lr=3e-4, lr_decay_style='linear', train_samples=999, lr_warmup_fraction=0.013, global_batch_size=10,
         lr_warmup_init=1e-5),
    dict(lr=1e-3, min_lr=1e-4, lr_decay_style='cosine', train_iters=40, lr_warmup_iters=3, global_batch_size=2,
         start_weight_decay=0.01, end_weight_decay=0.1, weight_decay_incr_style='cosine'),
    dict(lr=1e-3, lr_decay_style='linear', train_iters=40, global_batch_size=2,
         start_weight_decay=0.0, end_weight_decay=0.05, weight_decay_incr_style='linear'),
    # Rejected configurations.
    dict(lr=1e-3, lr_decay_style='cosine', train_iters=10, lr_warmup_iters=10, global_batch_size=2),
    dict(lr=1e-3, min_lr=2e-3, lr_decay_style='cosine', train_iters=10, global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='cosine', train_iters=10, lr_warmup_iters=2, lr_warmup_fraction=0.1,
         global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='cosine', train_samples=100, lr_warmup_iters=2, global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='cosine', train_iters=10, lr_decay_samples=50, global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='linear', train_iters=10, global_batch_size=2, start_weight_decay=0.1,
         end_weight_decay=0.01, weight_decay_incr_style='linear'),
]

with open(sys.argv[1], 'w') as out:
    for case in CASES:
        out.write('case ' + ' '.join(f'{k}={v!r}'.replace("'", '') for k, v in case.items()) + '\n')
        try:
            sched = build(case)
        except AssertionError:
            out.write('error\n')
            continue
        iters = case.get('train_iters') or (case['train_samples'] // case['global_batch_size'])
        # Megatron's loop: the optimizer steps with the current lr, then the scheduler advances by the
        # global batch size; go 20% past the end to cover the tail.
        for _ in range(iters + iters // 5 + 1):
            out.write(f'{sched.num_steps} {sched.lr!r} {sched.wd!r}\n')
            sched.step(case['global_batch_size'])
