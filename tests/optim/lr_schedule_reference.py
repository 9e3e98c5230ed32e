# defines: a transcription of Megatron-LM's LR/weight-decay schedule (optimizer_param_scheduler.py and
# training.get_optimizer_param_scheduler, with arguments.py's checks) and of NVIDIA DLE BERT's PolyWarmUpScheduler
# (schedulers.py, as run_pretraining.py steps it) for tests/optim/test_lr_schedule.cpp.
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


class PolyWarmUpScheduler:
    """NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT/schedulers.py, one param group, torch removed."""

    def __init__(self, base_lr, warmup, total_steps, degree=0.5):
        self.base_lrs = [base_lr]
        self.warmup = warmup
        self.total_steps = total_steps
        self.degree = degree
        self.last_epoch = 0

    def step(self, param_group):
        # run_pretraining.py calls this just before optimizer.step(); FusedLAMB keeps group['step'] (absent
        # before its first step), so last_epoch is the number of the step about to be taken.
        if 'step' in param_group:
            self.last_epoch = param_group['step'] + 1
        else:
            self.last_epoch = 1
        param_group['lr'] = self.get_lr()[0]

    def get_lr(self):
        progress = self.last_epoch / self.total_steps
        if progress < self.warmup:
            return [base_lr * progress / self.warmup for base_lr in self.base_lrs]
        else:
            return [base_lr * ((1.0 - progress) ** self.degree) for base_lr in self.base_lrs]


def nvidia_rows(a, iters):
    """(num_steps, lr, wd) per optimizer step for --lr-decay-style nvidia-poly-warmup.

    Iteration-based: total_steps = the decay iterations, warmup = --lr-warmup-fraction (or --lr-warmup-iters over
    the decay iterations). Sample-based (lmforge's extension; NVIDIA counts steps): progress = samples through the
    step about to be taken / decay samples. Past the end NVIDIA's formula has no real value; lmforge uses 0."""
    assert a.get('min_lr', 0.0) == 0.0 and a.get('lr_warmup_init', 0.0) == 0.0
    gbs = a['global_batch_size']
    megatron = build(dict(a, lr_decay_style='linear'))  # same flag checks; gives the weight-decay schedule
    frac = a.get('lr_warmup_fraction')
    if a.get('train_iters'):
        total = a.get('lr_decay_iters', a['train_iters'])
        warmup = frac if frac is not None else a.get('lr_warmup_iters', 0) / total
        sched = PolyWarmUpScheduler(a['lr'], warmup, total)
        unit = 1
    else:
        total = a.get('lr_decay_samples', a['train_samples'])
        warmup = frac if frac is not None else a.get('lr_warmup_samples', 0) / total
        sched = PolyWarmUpScheduler(a['lr'], warmup, total)
        unit = gbs
    rows = []
    group = {}
    for k in range(1, iters + 1):
        sched.step(group)
        if unit != 1:  # samples: progress = k·gbs / decay samples (the step about to be taken ends at sample k·gbs)
            sched.last_epoch = k * gbs
            group['lr'] = sched.get_lr()[0]
        if k * unit > total:  # past total_steps
            group['lr'] = 0.0
        rows.append((megatron.num_steps, group['lr'], megatron.wd))
        group['step'] = k  # optimizer.step()
        megatron.step(gbs)
    return rows


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
    # NVIDIA's PolyWarmUpScheduler: its phase-1 and phase-2 warm-up fractions, boundary fractions (x = w exactly at
    # some step: the decay branch takes it), no warm-up, warm-up in iterations, a shorter decay, sample counts.
    dict(lr=6e-3, lr_decay_style='nvidia-poly-warmup', train_iters=70, lr_warmup_fraction=0.2843,
         global_batch_size=4, weight_decay=0.01),
    dict(lr=4e-3, lr_decay_style='nvidia-poly-warmup', train_iters=125, lr_warmup_fraction=0.128,
         global_batch_size=3),
    dict(lr=1e-3, lr_decay_style='nvidia-poly-warmup', train_iters=10, lr_warmup_fraction=0.2, global_batch_size=1),
    dict(lr=1e-3, lr_decay_style='nvidia-poly-warmup', train_iters=40, lr_warmup_fraction=0.25, global_batch_size=8),
    dict(lr=1e-3, lr_decay_style='nvidia-poly-warmup', train_iters=30, lr_warmup_fraction=0.1, global_batch_size=5),
    dict(lr=2e-3, lr_decay_style='nvidia-poly-warmup', train_iters=20, global_batch_size=2),
    dict(lr=2e-3, lr_decay_style='nvidia-poly-warmup', train_iters=33, lr_warmup_iters=7, global_batch_size=2),
    dict(lr=2e-3, lr_decay_style='nvidia-poly-warmup', train_iters=50, lr_decay_iters=30, lr_warmup_fraction=0.3,
         global_batch_size=6),
    dict(lr=5e-4, lr_decay_style='nvidia-poly-warmup', train_samples=1000, lr_warmup_fraction=0.2843,
         global_batch_size=16),
    # Rejected configurations.
    dict(lr=1e-3, lr_decay_style='cosine', train_iters=10, lr_warmup_iters=10, global_batch_size=2),
    dict(lr=1e-3, min_lr=2e-3, lr_decay_style='cosine', train_iters=10, global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='cosine', train_iters=10, lr_warmup_iters=2, lr_warmup_fraction=0.1,
         global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='cosine', train_samples=100, lr_warmup_iters=2, global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='cosine', train_iters=10, lr_decay_samples=50, global_batch_size=2),
    dict(lr=1e-3, lr_decay_style='linear', train_iters=10, global_batch_size=2, start_weight_decay=0.1,
         end_weight_decay=0.01, weight_decay_incr_style='linear'),
    dict(lr=1e-3, min_lr=1e-5, lr_decay_style='nvidia-poly-warmup', train_iters=10, lr_warmup_fraction=0.2,
         global_batch_size=2),
    dict(lr=1e-3, lr_warmup_init=1e-5, lr_decay_style='nvidia-poly-warmup', train_iters=10,
         lr_warmup_fraction=0.2, global_batch_size=2),
]

with open(sys.argv[1], 'w') as out:
    for case in CASES:
        out.write('case ' + ' '.join(f'{k}={v!r}'.replace("'", '') for k, v in case.items()) + '\n')
        iters = case.get('train_iters') or (case['train_samples'] // case['global_batch_size'])
        if case.get('lr_decay_style') == 'nvidia-poly-warmup':
            try:
                rows = nvidia_rows(case, iters + iters // 5 + 1)
            except AssertionError:
                out.write('error\n')
                continue
            for num_steps, lr, wd in rows:
                out.write(f'{num_steps} {lr!r} {wd!r}\n')
            continue
        try:
            sched = build(case)
        except AssertionError:
            out.write('error\n')
            continue
        # Megatron's loop: the optimizer steps with the current lr, then the scheduler advances by the
        # global batch size; go 20% past the end to cover the tail.
        for _ in range(iters + iters // 5 + 1):
            out.write(f'{sched.num_steps} {sched.lr!r} {sched.wd!r}\n')
            sched.step(case['global_batch_size'])
