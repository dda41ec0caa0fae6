"""The simulated policy: per-prompt success probabilities that move as GRPO trains (docs/simulator.md).

Every prompt i of the training pool (and every prompt j of the held-out evaluation set) belongs to a
cluster c(i) (a topic or skill) and has a difficulty b_i. The policy's success logit is

    l_i = lambda_i * (s_0 + s_c(i) + m_i) - b_i          p_i = sigmoid(l_i)

    s_0      global skill: transfers to every prompt, held-out ones included
    s_c      cluster skill: transfers to every prompt of cluster c, held-out ones included
    m_i      memorisation of training prompt i: moves prompt i only (0 for held-out prompts)
    lambda_i 1 for a learnable prompt, 0 for one beyond the model's reach (never moves)

At the start s = m = 0, so p_i = sigmoid(-b_i) is the prompt's initial pass rate, drawn from the
preset's pass-rate histogram. A trained group g of prompt i with rewards r_j, GRPO advantages
A_j = (r_j - mean r) / (std r + eps) and staleness weights w_j = staleness_decay ** lag_j carries

    G_g = sum_j w_j A_j (r_j - mean r)        (= n sigma_pop^2 / (sigma + eps) when on-policy)

which is exactly the GRPO gradient on the logit of a Bernoulli policy (d log pi(r) / d l = r - p and
sum_j A_j = 0): zero for an all-equal group, largest at p = 0.5 (Proposition 3.1). With
u_g = G_g / (ref_group_size / 2) (one on-policy group of ref_group_size rollouts at p = 0.5 gives
u close to 1) the step is

    s_0 += global_gain   * sum_g u_g
    s_c += cluster_gain  * sum_{g in c} u_g
    m_i += memorize_gain * u_g

Movement is a sum over the step's groups with a constant normaliser (as Dr. GRPO's constant loss
normaliser): a strategy is paid for the signal it collects, not for the number of steps it splits it
into. The held-out accuracy is the mean of p_j over the held-out set; memorisation never reaches it,
so overfitting a few training prompts does not look like progress.

A preset may give `levels` (Level): the pool and the held-out set mixed from kinds of prompts, each
its own cluster with its own initial pass rates, shares and plasticity (lambda_i, a float in place
of the 0/1 learnable flag; docs/simulator.md, "Levels").

Switchable effects, all off by default (SimConfig; docs/simulator.md, "Effects that decide between
strategies"): loss_norm="token_mean" (the step times reference tokens / the batch's tokens, as the
trainer's loss), noise_scale (gradient noise ~ 1/sqrt(informative sequences)), optimizer="rms"
(Adam-like scale-free steps on the skills; rms_shared: one second moment for all of them),
memo_decay and skill_drift (forgetting: untrained pass rates fall), memorize_to_transfer
(memorize_gain as a multiple of one group's transfer), transfer_asymmetry, interference (a
cluster's groups lower the others), relearn (savings: a skill below its best relearns faster),
num_minibatches (updates a step), update_cost (an update's second-order cost), repeat_decay
(a prompt's repeated rollouts transfer less) and repeat_harm (far past the grace they unteach).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

PRESET_DIR = Path(__file__).parent / "presets"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # numerically safe sigmoid


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


LOSS_NORMS = ("constant", "token_mean")
OPTIMIZERS = ("sgd", "rms")
REPEAT_UNITS = ("rollouts", "visits")
WEAR_UNITS = ("rollouts", "prompts")


@dataclass
class SimConfig:
    """Everything about the simulated policy except the pool's pass-rate histogram."""

    num_clusters: int = 8
    """Number of skill clusters (topics); transfer within a cluster is stronger than across."""
    eval_prompts: int = 500
    """Size of the held-out evaluation set (never trained on), drawn like the training pool."""
    pool_seed: int = 0
    """Seed of the pool and the evaluation set (difficulties, clusters); the same for every run seed,
    so all strategies and seeds start from the same policy on the same data."""
    global_gain: float = 4e-5
    """Logit gain of the global skill s_0 per unit of group signal u (one on-policy group of
    ref_group_size rollouts at p = 0.5 is about one unit)."""
    cluster_gain: float = 1.6e-4
    """Logit gain of the cluster skill s_c per unit of signal of a group of that cluster."""
    memorize_gain: float = 0.2
    """Logit gain of a training prompt's own memorisation m_i per unit of its group's signal."""
    ref_group_size: int = 16
    """Group size that defines one unit of signal (normally the run's n)."""
    staleness_decay: float = 0.9
    """Weight of a rollout trained `lag` policy versions after it was generated: decay ** lag."""
    unlearnable_fraction: float = 0.0
    """Share of all prompts (taken from those with pass rate 0) that no training can move."""
    p_floor: float = 1e-4
    """Smallest initial pass rate (and 1 - largest): keeps logits finite."""
    zero_bin_max: float = 1.0 / 64
    """A histogram bin [0, 0] means "never solved when measured": p is drawn log-uniformly in
    [p_floor, zero_bin_max]; a bin [1, 1] mirrors it."""
    tokens_easy: float = 500.0
    """Mean generated tokens of a prompt with initial pass rate 1."""
    tokens_hard: float = 2500.0
    """Mean generated tokens of a prompt with initial pass rate 0 (linear in between)."""
    tokens_sigma: float = 0.5
    """Log-normal spread of a rollout's length around its prompt's mean."""
    fail_token_factor: float = 1.5
    """Failed rollouts are this much longer than successful ones (rambling, truncation)."""
    max_tokens: int = 8192
    """Response length limit: token counts are clipped to it."""
    short_answers: int = 0
    """0: rollouts carry no completion log-probs (long chains of thought). W > 0: each rollout is a
    short answer, the one correct completion with probability p or wrong answer j = 1..W with
    (1 - p) 2^-j / (1 - 2^-W), and the outcome carries its log-prob and identity (Outcome.logprob,
    completion_key), as a real sampler does; rewards are the same draws either way. What
    likelihood-rank reads (rollalloc.likelihood; the default testbed's answers are of this kind)."""
    eval_samples: int = 0
    """0: held-out accuracy is the exact mean of p_j; k > 0: each held-out prompt is sampled k
    times, as a real evaluation would (adds evaluation noise)."""
    adv_eps: float = 1e-6
    """eps of the GRPO advantage (r - mean) / (std + eps)."""

    # Effects of the learning model that decide between strategies (docs/simulator.md, "Effects
    # that decide between strategies"). Every one is off by default, so the figures and the fitted
    # presets are those of the model above until a fit turns them on.
    memorize_to_transfer: float | None = None
    """Memorisation-to-transfer ratio: if set, memorize_gain = ratio * (global_gain + cluster_gain)
    (a trained prompt's own logit moves `ratio` times what one group moves every prompt of its
    cluster). None: memorize_gain as given (defaults 0.2 / (4e-5 + 1.6e-4) = 1000). To be fitted
    to real GRPO runs (benchmarks/fit_testbed_preset.py's k_m / k_g)."""
    loss_norm: str = "constant"
    """Normaliser of a step's summed group signal. 'constant': a constant, as Dr. GRPO's loss
    (arXiv 2503.20783): a zero-variance group and a skipped group are the same to the learner.
    'token_mean': as the real trainer's loss (rollalloc/train/loss.py; verl's and DAPO's token-mean):
    divided by the completion tokens of *all* the batch's rollouts, zero-variance ones included,
    times those of a reference batch (norm_ref_prompts x ref_group_size rollouts of the pool's initial
    expected length), so that batch moves as under 'constant'."""
    norm_ref_prompts: int = 128
    """Prompts of the reference batch (norm_ref_prompts groups of ref_group_size rollouts) of
    loss_norm='token_mean' and optimizer='rms'; 128 is the default batch of `rollalloc simulate`
    and of the papers' scripts."""
    noise_scale: float = 0.0
    """Gradient noise scale B_noise (McCandlish et al. 2018, arXiv 1812.06162), in reference
    groups: each step adds N(0, B_noise * sum_g e_g) to the signal of s_0 and, independently, of
    every s_c (its own groups), with e_g = sum_j w_j^2 A_j^2 / (ref_group_size - 1) (1 for an
    informative reference group, 0 for a zero-variance one). Noise equals signal for a step of
    B_noise informative reference groups: relative noise ~ 1/sqrt(informative sequences). 0: none.
    Normalised like the signal (loss_norm). Zero-mean: it costs progress only through
    optimizer='rms'. With noise_progress_scale set, it is the trace noise that only Adam's
    normaliser v sees (B_simple = tr(Sigma) / |G|^2)."""
    noise_progress_scale: float | None = None
    """Split gradient noise (docs/simulator.md, "Trace noise and projected noise"). None: one
    noise, noise_scale's draw enters both the step's numerator x and optimizer='rms''s second
    moment v (the model before; bit-identical). Set (>= 0): the numerator x, what moves the
    skills, gets N(0, noise_progress_scale * sum_g e_g), the noise projected on the mean gradient
    (B_G = G^T Sigma G / |G|^4), while v gets the expected square of the full noise,
    x_signal^2 + noise_scale * sum_g e_g (times norm^2): in high dimension a skill's per-weight
    second moment concentrates at |G|^2 + tr(Sigma). 0: runs differ only through their rollouts."""
    optimizer: str = "sgd"
    """'sgd': a skill moves gain * (normalised signal + noise). 'rms': Adam-like (RMSprop, no
    momentum): s_0 and every s_c move gain * a * x / sqrt(v_hat), x the step's normalised signal
    plus noise, v the bias-corrected EMA (rms_beta) of x^2, a the expected signal of the first
    GRPO steps on the pool (so noise-free uniform GRPO starts at the 'sgd' speed). The step is scale
    free (a batch diluted by zero-variance groups moves as far as a full one) and noise shrinks its
    useful part. Memorisation keeps the 'sgd' rule."""
    rms_beta: float = 0.999
    """EMA decay of the squared step of optimizer='rms' (Adam's beta2)."""
    memo_decay: float = 0.0
    """Forgetting: every step each prompt's memorisation m_i shrinks by this fraction (m_i *=
    1 - memo_decay), trained or not, so an evicted prompt's pass rate falls back toward what
    transfer gives it. 0: nothing is forgotten."""
    skill_drift: float = 0.0
    """Std of a per-step random walk of s_0 and every s_c (logits), independent of the batch:
    pass rates of prompts not trained can fall. 0: no drift."""
    transfer_asymmetry: float = 0.0
    """beta: the skills' (s_0, s_c) share of a group's signal is multiplied by
    (2 (1 - rbar))^beta, rbar the group's success rate; memorisation keeps the full signal. A group
    with few successes teaches the held-out set more than its mirror with few failures, as measured
    on the real policy (benchmarks/measure_group_value.py, fitted by fit_transfer_asymmetry.py). At
    beta = 1 the skills get exactly twice the gradient of the group's successful rollouts. The
    group's gradient noise (noise_scale) is not scaled: the asymmetry is in what the mean step
    teaches the held-out set, the noise of its rollouts' scores is the same. 0: symmetric, the model
    before (bit-identical)."""
    transfer_ramp_steps: float = 0.0
    """Levels with a transfer matrix and `transfer_late` rows: W moves linearly from the early rows
    to the late ones over this many updates. 0: the early rows only (`transfer_late` unused)."""
    rms_shared: bool = False
    """optimizer='rms' with one second moment for all cluster skills s_1..s_K (the network's
    weights are shared by every topic or level, and Adam normalises a weight by the whole batch's
    gradient): v is the EMA of the mean over skills of x_c^2, so a skill's step is its share of the
    step, not its own signal normalised to a fixed size. s_0 keeps its own. False: every skill its
    own second moment (the model before, bit-identical)."""
    interference: float = 0.0
    """gamma: a group's signal on cluster (level) c also moves every other cluster skill by -gamma
    times that signal (W = I - gamma (J - I) on the cluster skills; s_0 unchanged), and its gradient
    noise reaches them scaled the same way. Learning one topic costs the others, as measured late in
    a real GRPO run (docs/simulator.md, "Session 12"). 0: none (the model before, bit-identical)."""

    relearn: float = 0.0
    """Savings: a cluster skill below the highest value it has had (0 at the start: the warm
    start's) moves (1 + relearn) times as far on its own groups' signal, so what interference took
    comes back faster than new skill is learnt (rehearsal in continual learning). Applied to the
    skill's own signal before a transfer matrix or interference mixes it. 0: none (the model
    before, bit-identical)."""

    displace_rate: float = 0.0
    """Levels with `displace` rows: every update each level's displacement delta_b moves this
    share of the way to its target -sum_a D[a, b] sigma_a^displace_power, sigma_a level a's share
    of the update's summed group signal. A batch of one level's groups drags the others' logits
    away at once and a mixed batch much less, as GRPO on part of the paper testbed's pool shows
    (docs/simulator.md, "Session 12"). 0: no displacement (the model before, bit-identical)."""
    contrast_decay: float = 0.0
    """kappa: the hard tail of a cluster (a level) closes in as its skill grows: a prompt harder
    than the cluster's mean, b_i > bbar_c, has b_i -> bbar_c + (b_i - bbar_c) exp(-kappa max(
    lambda_i (s_0 + s_c), 0)); bbar_c the mean difficulty of the cluster's learnable prompts, pool
    and held-out together; easier prompts keep theirs. 0: off. GRPO on the paper testbed's short
    chains alone lifts their pool prompts off 0 (84-90% of its groups vary in the second
    evaluation interval, 98% by the end) where fixed difficulties keep the hard tail at 0
    (docs/simulator.md, "Session 14"). The ceiling oracle refuses it (its held-out weights assume
    fixed difficulties)."""
    displace_power: float = 1.0
    """k of displace_rate: the target grows as the share to this power (> 1: a displacement that
    only a batch dominated by the displacing level causes)."""
    num_minibatches: int = 1
    """Optimiser updates per step, after the trainer's `learner.num_minibatches`: the step's groups
    are split at random into this many parts (min(m, groups) updates), each one update with its
    own token-mean normaliser and noise; the policy version (staleness, memo_decay) advances once
    per step. An approximation: the trainer shuffles rollouts, not groups, and always makes m
    updates. 1: one update a step (the model before, bit-identical)."""
    update_cost: float = 0.0
    """c: the second-order cost of an update (the curvature term of McCandlish et al. 2018's
    expected improvement, arXiv 1812.06162, eq. 2.3): each skill moves gain * (z - c z^2 / a)
    instead of gain * z, z its step (a x / sqrt(v_hat), optimizer='rms') and
    a its step scale (first_step_signal, a / K for a cluster skill). A typical update
    has z ~ a, so an update gains on average only where its signal is more than about c of its
    size: a noisy update can lose, and fewer, larger updates can pay. Needs optimizer='rms' (only
    there is a step's size fixed; under 'sgd' a batch concentrated on one cluster would pay K
    times its share). With rms_shared a concentrated batch's cluster step is up to sqrt(K) a / K
    and pays accordingly. 0: none (the model before, bit-identical)."""
    fast_max: float = 0.0
    """F: the most a fast shared component f can add to every learnable prompt's logit (lambda_i f,
    pool and held-out alike), the quick first gain of a warm-started policy (real GRPO on the hard
    pool: +2 points in its first 4,096 rollouts, then nearly flat; docs/simulator.md, "Session 30").
    Each update moves f += fast_rate (F - f) c^2 - fast_damage (1 - c^2), c^2 = S^2 / (S^2 +
    fast_noise E) the expected squared cosine between the update and the shared direction (S the
    update's summed group signal, E its summed noise energy e_g): an update of few informative
    sequences is mostly noise, learns little of f and, at a fixed step size (Adam), undoes some
    (modelled on the noise floor of SGD at a fixed learning rate). f settles where the two
    balance, F - f = rho B_f E / (r S^2), lower for updates of fewer informative sequences; it has
    no lower bound. An update without signal leaves f. The ceiling oracle refuses it. 0: off (the
    model before, bit-identical)."""
    fast_rate: float = 0.0
    """r of fast_max: the share of F - f a noise-free update learns."""
    fast_noise: float = 0.0
    """B_f of fast_max, in noise_scale's units: the noise energy at which an update is half noise
    (n informative reference groups give S^2 / E of about n u^2, u their mean signal)."""
    fast_damage: float = 0.0
    """rho of fast_max: what an update's noise share (1 - c^2) takes from f."""
    step_noise: float = 0.0
    """B_s: a skill step (s_0, s_c) moves only its signal share c^2 = S^2 / (S^2 + B_s E) of what
    it would (S the (mini-)batch's summed group signal, E its summed noise energy, both after
    plasticity; fast_max's form, in its units). A normalised step (loss_norm='token_mean',
    optimizer='rms') gives an update of a few groups a full update's size; in the real trainer
    such an update is mostly noise, and real GRPO loses 1-2 points when a one-prompt step follows
    each full one (docs/simulator.md, "Session 44"). Memorisation keeps the whole signal. 0: off
    (the model before, bit-identical)."""
    repeat_decay: float = 0.0
    """delta: repeated data teaches less. Every trained rollout of a prompt is one more exposure to
    it (a copy counts as its original, Level.distinct); exposures j = k ref_group_size ..
    (k + 1) ref_group_size - 1 are its visit k (k = 0 the first), and each passes
    exp(-delta max(0, k - repeat_grace)) of its share of a group's signal to the skills (s_0, s_c);
    memorisation and the fast component (fast_max) get the whole signal. A reference group on
    visit k thus teaches the skills exp(-delta max(0, k - grace)) of a fresh prompt's, and a larger
    group pays for its extra rollouts as the visits they stand for would. The form is Muennighoff
    et al. 2023's (arXiv 2305.16264, eq. 5: the worth of the k-th repetition of data decays as
    exp(-k / R*), R* = 1 / delta). The fast component is left out because real GRPO on a small
    part of the pool keeps pace with the whole pool for its first ~6 visits a prompt, where that
    component learns (docs/simulator.md, "Session 32"). A strategy that trains the same prompts
    again and again (a narrow top of a ranking) pays for it. 0: every exposure teaches alike (the
    model before, bit-identical)."""
    repeat_grace: int = 0
    """Visits a prompt gets before repeat_decay starts: visit k teaches exp(-delta max(0, k -
    grace)) (an integer >= 0; 0: from the second visit on). Muennighoff et al. find a few repeats
    almost as good as new data; real GRPO on the default testbed loses little at 12 visits a prompt
    and a third of its gain at 24 ("Session 32")."""
    repeat_harm: float = 0.0
    """eta: what a repeated visit does not teach, it unteaches. Visit k passes a(k) = w(k) -
    eta (1 - w(k)) of its signal to the skills, w(k) = exp(-delta max(0, k - grace)) (repeat_decay):
    1 within the grace, falling to -eta on a prompt trained far past it, so a pool part trained for
    many visits lowers the held-out accuracy (Hernandez et al. 2022, arXiv 2205.10487: a small share
    of data repeated many times hurts a model's held-out loss, not only helps it less). Real GRPO on
    random 128- and 256-prompt parts of the default pool ends below its start on average
    (docs/simulator.md, "Session 34"). Memorisation and the fast component keep the whole signal.
    Needs repeat_decay > 0. 0: a repeat never hurts (the model before, bit-identical)."""
    repeat_memory: float = 0.0
    """h: the half-life, in learner steps, of a prompt's exposure count: every step it is trained
    or not, its count of repeat_decay's exposures fades by 2^(-1/h), so a visit's number k is
    the visits it had recently, not ever (a continuous count: exposure x weighs w(floor(x /
    ref_group_size)), the step's block the integral over its span). A part of P prompts trained
    64 groups a step then settles at about 64 h / (P ln 2) visits a prompt and keeps that visit's
    weight: a small part whose weight is negative unteaches at every step, a large one keeps
    learning, as real GRPO on random parts of the default pool does (docs/simulator.md, "Session
    34"; under optimizer='rms' a weight shared by a whole run's steps changes the step's sign, not
    its size: the scale-free step normalises it away); a strategy is charged for training the
    same prompts again soon, not for coming back to them after a while. 0: exposures never fade
    (the model before, bit-identical)."""
    repeat_unit: str = "rollouts"
    """What repeat_decay counts as exposure. 'rollouts': every trained rollout, ref_group_size of
    them a visit, so a group of 64 on one prompt is 8 visits at once (a larger group pays for its
    extra rollouts as the visits they stand for would). 'visits': a step in which a prompt is
    trained is one visit whatever its group size or copies, so only training it again in later
    steps counts as a repeat. The two agree for groups of ref_group_size on distinct prompts; they
    differ for GRPO too where a step draws two copies of one original (Level.distinct: two groups
    of 8 are 2 visits in 'rollouts', 1 in 'visits'), so a fit to GRPO barely tells them apart; real
    Knapsack-RL on the disjoint warm start (groups up to 8x the reference on a few prompts) learns
    the 2-term chains as GRPO does, which 'rollouts' makes it unlearn (docs/simulator.md, "Session
    39")."""
    answer_classes: int = 0
    """K: every prompt, pool and held-out, gets one of K answer classes, the bin of
    logit(p_i(0)) + answer_noise * N(0, 1) among the pool's K quantiles (a copy takes its
    original's): prompts of one class share their answer, and on arith a prompt's pass rate
    depends on its answer (R^2 0.52-0.68 on the default testbed's warm start, docs/columns.md), so
    the classes hold prompts of similar p. Strategies read it as the pool column `answer`. 0: no
    classes (the model before, bit-identical)."""
    answer_noise: float = 1.0
    """The spread, in logits, of the class draw (answer_classes): 0 sorts the pool into classes
    by p exactly; larger values make the class a weaker predictor of p."""
    answer_shift: float = 0.0
    """c: an update whose signal is skewed toward some answer classes shifts the policy's answer
    prior: every update each class's prior delta_b moves answer_rate of the way to c (sigma_b -
    pi_b), sigma_b the class's share of the update's summed |group signal| and pi_b its share of
    the pool, and a prompt of class a, pool or held-out, has delta_a - log sum_b pi_b
    exp(delta_b) added to its logit outside the plasticity (a softmax prior: what the favoured
    answers gain, every prompt pays for in its normaliser). A balanced update (sigma = pi)
    leaves the prior where it is. GRPO on the 512 default-pool prompts nearest p = 1/2, whose
    answers are skewed, raises held-out accuracy on the favoured answers by 22 points and lowers
    it on every other prompt by 7, which this form reproduces from the gain alone
    (docs/simulator.md, "Session 35"). Needs answer_classes >= 2. 0: no shift (the model
    before, bit-identical)."""
    answer_rate: float = 0.05
    """r of answer_shift: the share of the way to its target a class's offset moves per update
    (small: the prior follows the run's recent updates, not the last one)."""
    answer_scope: str = "pool"
    """Which prompts share the answer prior (answer_shift). 'pool': every prompt. 'solvable': a
    prompt the policy can never solve, one that cannot learn (learnable 0) and starts below a
    pass rate of 1e-3, is outside it: its groups never vary, and its answers are its own (the hard
    pool's 3-digit sums against 1-digit chains). The prior's classes are then the quantiles among
    the prompts inside, pi_b their shares; an outside prompt has no offset and no part in sigma_b.
    Under 'pool' such prompts' classes never carry signal, so every update pushes the prior toward
    all the other classes at once (GRPO +10 points on the hard pool; docs/simulator.md, "Session
    45"). A prompt that cannot learn but varies (a level of plasticity 0 at p = 0.6) stays inside.
    The pool column `answer` is the 'pool' classes under both scopes: what a strategy sees does
    not change. Identical to 'pool' where no prompt is outside."""
    fast_updates: int = 1
    """Optimiser updates a step as the fast component and the wear see them (the trainer's
    `learner.num_minibatches`). The fast component splits the step's groups at random into this
    many parts (at most one per group), each one move of f; the wear (wear_rate) takes this many
    updates whatever the step's size, each on 1/fast_updates of every group's rollouts, as the
    trainer splits rollouts (a step of one group is one move of f and fast_updates of w). The
    skills keep num_minibatches (a preset fitted with one update a step keeps its speed per
    rollout)."""
    wear_rate: float = 0.0
    """omega: wear from noisy updates. A logit w is subtracted from every prompt, pool and
    held-out, of every level and outside its plasticity (a level that learns nothing is worn
    too); every optimiser update (fast_updates of them a step, each on 1/fast_updates of the
    step's rollouts however few they are, as the trainer's mini-batches) moves
    w <- (1 - wear_heal) w + omega (1 - c^2), c^2 = S^2 / (S^2 + wear_noise E), with S and E the
    update's summed group signal and noise energy before plasticity (what its gradient is made
    of). An update of few informative sequences is mostly noise and, at a fixed step size (Adam),
    moves the weights off where every level was; clean updates let the wear relax. Uniform GRPO
    settles at w = omega (1 - c^2) / h (h > 0; at h = 0 w grows without bound); a strategy that
    takes some updates on a handful of groups (CERO's paced steps: a fifth of its updates on 1-7
    groups, real and simulated) settles higher. The form is the noise floor of SGD at a fixed learning rate
    (Mandt et al. 2017, arXiv 1704.04289: the stationary excess loss grows with the gradient noise
    of a step and shrinks with the curvature that pulls back); docs/simulator.md, "Session 41".
    0: none (the model before, bit-identical)."""
    wear_noise: float = 0.0
    """B_w of wear_rate: the update size at which it is half noise (c^2 = 1/2). Under
    wear_unit='rollouts' in noise_scale's units (roughly the informative reference groups of one
    update; over a step of m = fast_updates updates, c^2 = S^2 / (S^2 + m B_w E) with the step's S
    and E), under 'prompts' the effective number of prompts n_eff (independent of m)."""
    wear_heal: float = 0.0
    """h of wear_rate: the share of the wear each update removes (the pull back to where the
    levels were)."""
    wear_unit: str = "rollouts"
    """What an update's noise is made of, for wear_rate. 'rollouts': E, the summed noise energy of
    its rollouts (a group of 8 x ref_group_size rollouts counts as 8 reference groups). 'prompts':
    sum_g u_g^2, each group's signal squared, so c^2 = n_eff / (n_eff + B_w) with n_eff = (sum_g
    u_g)^2 / sum_g u_g^2 the update's effective number of prompts (the participation ratio of its
    signal): many rollouts of one prompt push in that prompt's own direction, not a general one,
    and a step that concentrates its rollouts on a few prompts (Knapsack-RL's large groups) is as
    noisy as one on a few groups. The two agree up to B_w's scale for equal groups."""

    def __post_init__(self) -> None:
        for f in fields(self):  # a number field given a string (a YAML quote), None or a bool
            v = getattr(self, f.name)
            if f.type in ("float", "int") and (
                (f.type == "float" and isinstance(v, (bool, np.bool_)))  # int fields: below
                or not isinstance(v, (int, float, np.integer, np.floating))
            ):
                raise ValueError(f"SimConfig.{f.name}: invalid value {v!r} (must be a number)")
        checks = {  # name -> (valid, what a valid value is)
            "num_clusters": (self.num_clusters >= 1, ">= 1"),
            "eval_prompts": (self.eval_prompts >= 1, ">= 1"),
            "global_gain": (self.global_gain >= 0, ">= 0"),
            "cluster_gain": (self.cluster_gain >= 0, ">= 0"),
            "memorize_gain": (self.memorize_gain >= 0, ">= 0"),
            "ref_group_size": (self.ref_group_size >= 2, ">= 2"),
            "staleness_decay": (0.0 <= self.staleness_decay <= 1.0, "in [0, 1]"),
            "unlearnable_fraction": (0.0 <= self.unlearnable_fraction < 1.0, "in [0, 1)"),
            "p_floor": (0.0 < self.p_floor < 0.5, "in (0, 0.5)"),
            "zero_bin_max": (
                self.p_floor < self.zero_bin_max < 0.5,
                f"in (p_floor = {self.p_floor}, 0.5)",
            ),
            "tokens_easy": (self.tokens_easy > 0, "> 0"),
            "tokens_hard": (self.tokens_hard > 0, "> 0"),
            "tokens_sigma": (self.tokens_sigma >= 0, ">= 0"),
            "fail_token_factor": (self.fail_token_factor > 0, "> 0"),
            "max_tokens": (self.max_tokens >= 1, ">= 1"),
            "short_answers": (
                _is_int(self.short_answers) and 0 <= self.short_answers <= 60,
                "an integer in [0, 60]",
            ),
            "eval_samples": (self.eval_samples >= 0, ">= 0"),
            "adv_eps": (self.adv_eps > 0, "> 0"),
            "memorize_to_transfer": (
                self.memorize_to_transfer is None or self.memorize_to_transfer >= 0,
                "None or >= 0",
            ),
            "loss_norm": (self.loss_norm in LOSS_NORMS, None),
            "norm_ref_prompts": (self.norm_ref_prompts >= 1, ">= 1"),
            "noise_scale": (self.noise_scale >= 0, ">= 0"),
            "contrast_decay": (self.contrast_decay >= 0, ">= 0"),
            "noise_progress_scale": (
                self.noise_progress_scale is None or self.noise_progress_scale >= 0,
                "None or >= 0",
            ),
            "optimizer": (self.optimizer in OPTIMIZERS, None),
            "repeat_unit": (self.repeat_unit in REPEAT_UNITS, None),
            "rms_beta": (0.0 <= self.rms_beta < 1.0, "in [0, 1)"),
            "memo_decay": (0.0 <= self.memo_decay < 1.0, "in [0, 1)"),
            "skill_drift": (self.skill_drift >= 0, ">= 0"),
            "transfer_asymmetry": (self.transfer_asymmetry >= 0, ">= 0"),
            "transfer_ramp_steps": (self.transfer_ramp_steps >= 0, ">= 0"),
            "interference": (self.interference >= 0, ">= 0"),
            "relearn": (self.relearn >= 0, ">= 0"),
            "displace_rate": (0.0 <= self.displace_rate <= 1.0, "in [0, 1]"),
            "displace_power": (self.displace_power > 0, "> 0"),
            "num_minibatches": (
                _is_int(self.num_minibatches) and self.num_minibatches >= 1,
                "an integer >= 1",
            ),
            "update_cost": (self.update_cost >= 0, ">= 0"),
            "fast_max": (self.fast_max >= 0, ">= 0"),
            "fast_rate": (0.0 <= self.fast_rate <= 1.0, "in [0, 1]"),
            "fast_noise": (self.fast_noise >= 0, ">= 0"),
            "fast_damage": (self.fast_damage >= 0, ">= 0"),
            "step_noise": (0 <= self.step_noise < np.inf, "finite and >= 0"),
            "wear_rate": (0 <= self.wear_rate < np.inf, "finite and >= 0"),
            "wear_noise": (0 <= self.wear_noise < np.inf, "finite and >= 0"),
            "wear_heal": (0.0 <= self.wear_heal <= 1.0, "in [0, 1]"),
            "wear_unit": (self.wear_unit in WEAR_UNITS, None),
            "fast_updates": (
                _is_int(self.fast_updates) and self.fast_updates >= 1,
                "an integer >= 1",
            ),
            "repeat_decay": (self.repeat_decay >= 0, ">= 0"),
            "repeat_grace": (
                _is_int(self.repeat_grace) and self.repeat_grace >= 0,
                "an integer >= 0",
            ),
            "repeat_harm": (0 <= self.repeat_harm < np.inf, "finite and >= 0"),
            "repeat_memory": (0 <= self.repeat_memory < np.inf, "finite and >= 0"),
            "answer_classes": (
                _is_int(self.answer_classes) and self.answer_classes >= 0,
                "an integer >= 0",
            ),
            "answer_noise": (0 <= self.answer_noise < np.inf, "finite and >= 0"),
            "answer_shift": (0 <= self.answer_shift < np.inf, "finite and >= 0"),
            "answer_rate": (0.0 < self.answer_rate <= 1.0, "in (0, 1]"),
            "answer_scope": (self.answer_scope in ("pool", "solvable"), "'pool' or 'solvable'"),
        }
        if self.answer_shift > 0 and self.answer_classes < 2:
            raise ValueError(
                f"SimConfig.answer_shift={self.answer_shift!r} needs answer_classes >= 2 (the "
                "prior it shifts is over the classes)"
            )
        if self.repeat_memory > 0 and self.repeat_decay == 0:
            raise ValueError(
                f"SimConfig.repeat_memory={self.repeat_memory!r} needs repeat_decay > 0 (it is "
                "the half-life of the exposures repeat_decay counts)"
            )
        if self.repeat_harm > 0 and self.repeat_decay == 0:
            raise ValueError(
                f"SimConfig.repeat_harm={self.repeat_harm!r} needs repeat_decay > 0 (it is the "
                "share of a repeated visit's discount that turns negative)"
            )
        if self.update_cost > 0 and self.optimizer != "rms":
            raise ValueError(
                f"SimConfig.update_cost={self.update_cost!r} needs optimizer='rms' (the cost is of "
                f"a step of fixed size), got optimizer={self.optimizer!r}"
            )
        for name, (ok, valid) in checks.items():
            if not ok:
                choices = {
                    "loss_norm": LOSS_NORMS,
                    "optimizer": OPTIMIZERS,
                    "repeat_unit": REPEAT_UNITS,
                    "wear_unit": WEAR_UNITS,
                }.get(name)
                valid = f"one of {list(choices)}" if choices else f"must be {valid}"
                raise ValueError(
                    f"SimConfig.{name}: invalid value {getattr(self, name)!r} ({valid})"
                )

    @property
    def memo_gain(self) -> float:
        """The memorisation gain in effect: memorize_to_transfer * (global_gain + cluster_gain) if
        the ratio is set, else memorize_gain."""
        if self.memorize_to_transfer is None:
            return self.memorize_gain
        return self.memorize_to_transfer * (self.global_gain + self.cluster_gain)

    @property
    def progress_noise(self) -> float:
        """The noise scale of a step's numerator: noise_progress_scale if set, else noise_scale."""
        if self.noise_progress_scale is None:
            return self.noise_scale
        return self.noise_progress_scale

    def replace(self, **overrides: Any) -> SimConfig:
        """A copy with `overrides` applied; unknown names raise ValueError naming them."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"SimConfig: unknown field(s) {unknown}; known: {sorted(known)}")
        return SimConfig(**{**asdict(self), **overrides})


@dataclass
class Level:
    """One level (kind of prompt) of a preset with `levels` (docs/simulator.md, "Levels"): its own
    share of the pool and of the held-out set, its own initial pass rates, its own skill cluster and
    a plasticity (how far its logits move per unit of skill; 0: never moves)."""

    name: str
    share: float
    """Share of the training pool (the pool's prompts are split by largest remainder)."""
    eval_share: float
    """Share of the held-out set (0: not in the benchmark, as a real `eval_weights` of 0)."""
    pass_rate_histogram: list[tuple[float, float, float]]
    """Initial pass rates of its pool prompts, [low, high, weight] bins as the preset's."""
    eval_pass_rate_histogram: list[tuple[float, float, float]] | None = None
    """Initial pass rates of its held-out prompts (None: as the pool's)."""
    plasticity: float = 1.0
    """lambda of its prompts: d logit / d skill, and the weight of its groups' signal on the skills
    (the chain rule); 1 as the base model, 0 unlearnable, in between a level that moves less."""
    transfer: dict[str, float] | None = None
    """Optional, a row of a transfer matrix W: one unit of this level's group signal moves level
    b's skill s_b by cluster_gain * W[this, b] (negative: interference). If any level of a preset
    has one, every level's groups act through W only (a level without a row teaches nothing) and
    s_0 gets no signal; measured on the real policy by benchmarks/transfer_matrix.py."""
    transfer_late: dict[str, float] | None = None
    """Optional, the row of W later in a run: with SimConfig.transfer_ramp_steps T > 0, W moves
    linearly from `transfer` at update 0 to `transfer_late` at update T and stays there."""
    learnable_share: float = 1.0
    """Share of its prompts (pool and held-out, each) that can be learnt at all: the hardest
    1 - learnable_share of them (lowest initial pass rate) get plasticity 0. A level whose real
    held-out accuracy stops rising well below 1 (docs/simulator.md, "Session 12")."""
    displace: dict[str, float] | None = None
    """Optional, D[this, b] (logits): how far an update made of this level's groups alone drags
    level b's logits (SimConfig.displace_rate); b's displacement is outside its plasticity."""
    ceiling: float = 1.0
    """The highest pass rate its prompts reach: p_i = ceiling sigmoid(l_i) (a tiny model sampled at
    temperature 1 levels off below 1: GRPO on the paper testbed's short chains alone holds their
    pool at 0.54-0.67 with nearly every group varying). A prompt that starts at or above it keeps
    ceiling 1. Initial pass rates are the histogram's either way."""
    distinct: int | None = None
    """Optional, how many of its pool prompts are distinct: the others are copies of them (the
    real arith pool repeats a short chain once the held-out set has taken most of its few
    strings: 122 2-term prompts, 18 distinct, on the paper testbed). A copy has its original's
    pass rate, plasticity and memorisation: training one trains them all. None: all distinct."""
    subskill_share: float = 0.0
    """Share of its learnable prompts (pool and held-out, each) that form its hard kind: the
    hardest by initial pass rate (a copy goes with its original). They get `subskill_transfer`
    times the level's skill plus a sub-skill of their own, moved only by their own groups' signal
    (and the level's skill only by the other prompts'); under optimizer='rms' both share the
    level's second moment. A kind that starts unsolved (2-term sums with a carry on a warm start
    that never saw 2-term chains) then rises only while a strategy keeps drawing its prompts
    (docs/simulator.md, "Session 42"). 0: none (the model before, bit-identical)."""
    subskill_transfer: float = 1.0
    """rho in [0, 1]: the share of the level's skill its hard kind gets (1: all of it, as every
    other prompt; 0: none, it learns from its own groups alone). s_0 and the fast component move
    it in full; with contrast_decay it closes in by rho (s_0 + s_c) + s_sub only, so at rho = 0 it
    closes in only as far as its own groups teach it; skill_drift does not move s_sub."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("transfer", "transfer_late", "displace", "distinct"):
            if d[key] is None:
                del d[key]
        if d["subskill_share"] == 0.0:
            del d["subskill_share"], d["subskill_transfer"]
        if d["learnable_share"] == 1.0:
            del d["learnable_share"]
        if d["ceiling"] == 1.0:
            del d["ceiling"]
        d["pass_rate_histogram"] = [list(b) for b in self.pass_rate_histogram]
        if self.eval_pass_rate_histogram is not None:
            d["eval_pass_rate_histogram"] = [list(b) for b in self.eval_pass_rate_histogram]
        return d


@dataclass
class Preset:
    """A prompt pool: its size, initial pass-rate histogram and simulator settings."""

    name: str
    num_prompts: int
    pass_rate_histogram: list[tuple[float, float, float]]  # [low, high, weight] bins
    sim: SimConfig = field(default_factory=SimConfig)
    description: str = ""
    source: str = ""
    levels: list[Level] | None = None
    """Optional: the pool and the held-out set as a mixture of levels, each its own cluster (then
    `pass_rate_histogram` is the pool's mixture and num_clusters is the number of levels)."""

    def to_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "num_prompts": self.num_prompts,
            "pass_rate_histogram": [list(b) for b in self.pass_rate_histogram],
            "sim": asdict(self.sim),
            "description": self.description,
            "source": self.source,
        }
        if self.levels is not None:
            d["levels"] = [lv.to_dict() for lv in self.levels]
        return d


def available_presets() -> list[str]:
    """Names of the built-in presets (JSON files under rollalloc/sim/presets/)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


HISTOGRAM_TOLERANCE = 1e-3
"""How far the weights of a pass-rate histogram may sum from 1 (rounding of written shares)."""
UNSOLVABLE = 1e-3
"""A prompt that cannot learn and starts below this pass rate is never solved (answer_scope)."""


def _is_int(v: Any) -> bool:
    """An integer (numpy's too), not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _validate_histogram(hist: Any, where: str) -> list[tuple[float, float, float]]:
    if not isinstance(hist, list) or not hist:
        raise ValueError(
            f"{where}: pass_rate_histogram must be a non-empty list of [low, high, weight]"
        )
    bins = []
    for k, b in enumerate(hist):
        if not isinstance(b, (list, tuple)) or len(b) != 3:
            raise ValueError(
                f"{where}: pass_rate_histogram[{k}] must be [low, high, weight], got {b!r}"
            )
        try:
            lo, hi, w = (float(x) for x in b)
        except (TypeError, ValueError):
            raise ValueError(
                f"{where}: pass_rate_histogram[{k}] = {b!r}: low, high and weight must be numbers"
            ) from None
        if not (0.0 <= lo <= hi <= 1.0) or not np.isfinite(w) or w < 0:
            raise ValueError(
                f"{where}: pass_rate_histogram[{k}] = {b!r}: need 0 <= low <= high <= 1, weight >= 0"
            )
        bins.append((lo, hi, w))
    total = sum(w for _, _, w in bins)
    if total <= 0:
        raise ValueError(f"{where}: pass_rate_histogram weights sum to 0")
    if abs(total - 1.0) > HISTOGRAM_TOLERANCE:
        # the weights are shares of the pool: a sum of 0.6 is a typo or a missing bin, and
        # rescaling it quietly would change every other bin's share
        raise ValueError(
            f"{where}: pass_rate_histogram weights sum to {total:.6g}, not 1 (they are shares "
            f"of the pool; within {HISTOGRAM_TOLERANCE:g})"
        )
    return bins


def preset_from_dict(d: dict[str, Any], name: str, where: str = "preset") -> Preset:
    """Build a Preset from a JSON pool description (`num_prompts`, `pass_rate_histogram`, optional
    `sim` overrides of SimConfig, `description`, `source`)."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: a pool description must be a JSON object")
    unknown = sorted(
        set(d)
        - {"name", "num_prompts", "pass_rate_histogram", "sim", "description", "source", "levels"}
    )
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}")
    if "num_prompts" not in d or ("pass_rate_histogram" not in d and "levels" not in d):
        raise ValueError(
            f"{where}: needs at least 'num_prompts' and 'pass_rate_histogram' (or 'levels')"
        )
    num_prompts = d["num_prompts"]
    if isinstance(num_prompts, bool) or not isinstance(num_prompts, int) or num_prompts < 1:
        raise ValueError(f"{where}: num_prompts must be a positive integer, got {num_prompts!r}")
    sim = SimConfig().replace(**(d.get("sim") or {}))
    levels = _validate_levels(d["levels"], where) if "levels" in d else None
    if "pass_rate_histogram" in d:
        hist = _validate_histogram(d["pass_rate_histogram"], where)
    else:  # the pool's mixture of the levels' histograms
        total = sum(lv.share for lv in levels)
        hist = [
            (lo, hi, lv.share / total * w) for lv in levels for lo, hi, w in lv.pass_rate_histogram
        ]
    return Preset(
        name=str(d.get("name", name)),
        num_prompts=num_prompts,
        pass_rate_histogram=hist,
        sim=sim,
        description=str(d.get("description", "")),
        source=str(d.get("source", "")),
        levels=levels,
    )


def _validate_levels(raw: Any, where: str) -> list[Level]:
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: levels must be a non-empty list of level objects")
    known = {f.name for f in fields(Level)}
    levels = []
    for k, x in enumerate(raw):
        at = f"{where}: levels[{k}]"
        if not isinstance(x, dict):
            raise ValueError(f"{at}: must be an object")
        if isinstance(x.get("name"), str):
            at = f"{at} ({x['name']})"
        unknown = sorted(set(x) - known)
        if unknown:
            raise ValueError(f"{at}: unknown key(s) {unknown}; known: {sorted(known)}")
        missing = [f for f in ("name", "share", "eval_share", "pass_rate_histogram") if f not in x]
        if missing:
            raise ValueError(f"{at}: missing {missing}")
        ones = (
            "share",
            "eval_share",
            "plasticity",
            "learnable_share",
            "ceiling",
            "subskill_transfer",
        )
        nums = {f: x.get(f, 1.0) for f in ones}
        nums["subskill_share"] = x.get("subskill_share", 0.0)
        for f, v in nums.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"{at}: {f} must be a number >= 0, got {v!r}")
        if not 0 < nums["ceiling"] <= 1:
            raise ValueError(f"{at}: ceiling must be in (0, 1], got {nums['ceiling']!r}")
        if not nums["subskill_transfer"] <= 1:
            raise ValueError(
                f"{at}: subskill_transfer must be in [0, 1] (a share of the level's skill), "
                f"got {nums['subskill_transfer']!r}"
            )
        if not nums["subskill_share"] < 1:
            raise ValueError(
                f"{at}: subskill_share must be in [0, 1), got {nums['subskill_share']!r}"
            )
        if nums["learnable_share"] > 1:
            raise ValueError(
                f"{at}: learnable_share must be in [0, 1], got {nums['learnable_share']!r}"
            )
        distinct = x.get("distinct")
        if distinct is not None and (
            isinstance(distinct, bool) or not isinstance(distinct, int) or distinct < 1
        ):
            raise ValueError(f"{at}: distinct must be an integer >= 1, got {distinct!r}")
        eh = x.get("eval_pass_rate_histogram")
        rows = {}
        for key in ("transfer", "transfer_late", "displace"):
            tr = x.get(key)
            if tr is not None:
                if not isinstance(tr, dict) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
                    for v in tr.values()
                ):
                    raise ValueError(f"{at}: {key} must map level names to finite numbers")
                tr = {str(k): float(v) for k, v in tr.items()}
            rows[key] = tr
        levels.append(
            Level(
                name=str(x["name"]),
                share=float(nums["share"]),
                eval_share=float(nums["eval_share"]),
                pass_rate_histogram=_validate_histogram(x["pass_rate_histogram"], at),
                eval_pass_rate_histogram=None if eh is None else _validate_histogram(eh, at),
                plasticity=float(nums["plasticity"]),
                learnable_share=float(nums["learnable_share"]),
                ceiling=float(nums["ceiling"]),
                transfer=rows["transfer"],
                transfer_late=rows["transfer_late"],
                displace=rows["displace"],
                distinct=distinct,
                subskill_share=float(nums["subskill_share"]),
                subskill_transfer=float(nums["subskill_transfer"]),
            )
        )
    names = [lv.name for lv in levels]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: level names must be distinct, got {names}")
    for lv in levels:
        rows = set(lv.transfer or {}) | set(lv.transfer_late or {}) | set(lv.displace or {})
        unknown = sorted(rows - set(names))
        if unknown:
            raise ValueError(f"{where}: level {lv.name}'s transfer names unknown levels {unknown}")
    if sum(lv.share for lv in levels) <= 0 or sum(lv.eval_share for lv in levels) <= 0:
        raise ValueError(f"{where}: the levels' shares and eval_shares must each sum above 0")
    return levels


def split_counts(shares: list[float], total: int) -> np.ndarray:
    """`total` items split in proportion to `shares` by largest remainder: (L,) ints summing to
    total (ties to the earlier level)."""
    w = np.asarray(shares, dtype=np.float64)
    exact = total * w / w.sum()  # (L,)
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: total - int(counts.sum())]] += 1
    return counts


def load_preset(name_or_path: str | Path) -> Preset:
    """A built-in preset by name (`dapo17k`, `deepmath`, `uniform`, ...) or a JSON file by path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"pool description {path} does not exist")
    else:
        path = PRESET_DIR / f"{name_or_path}.json"
        if not path.is_file():
            raise ValueError(
                f"unknown simulator preset {str(name_or_path)!r}; built-in: {available_presets()} "
                "(or give the path of a JSON pool description)"
            )
    try:
        d = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e
    return preset_from_dict(d, name=path.stem, where=str(path))


def draw_pass_rates(
    hist: list[tuple[float, float, float]], size: int, cfg: SimConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Initial pass rates (size,) drawn from the histogram, and a mask (size,) of the draws that came
    from a [0, 0] bin (candidates for `unlearnable`)."""
    w = np.array([b[2] for b in hist], dtype=np.float64)
    which = rng.choice(len(hist), size=size, p=w / w.sum())  # (size,) bin of each prompt
    lo = np.array([b[0] for b in hist])[which]
    hi = np.array([b[1] for b in hist])[which]
    u = rng.random(size)
    p = lo + (hi - lo) * u  # uniform within a ranged bin
    log_lo, log_hi = np.log(cfg.p_floor), np.log(cfg.zero_bin_max)
    tail = np.exp(log_lo + (log_hi - log_lo) * u)  # log-uniform "never / always solved"
    zero = (lo == 0.0) & (hi == 0.0)
    one = (lo == 1.0) & (hi == 1.0)
    p = np.where(zero, tail, np.where(one, 1.0 - tail, p))
    return np.clip(p, cfg.p_floor, 1.0 - cfg.p_floor), zero


def _draw_levels(
    levels: list[Level], n: int, m: int, cfg: SimConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pool (n) and held-out (m) prompts of a preset with levels: initial pass rates (n+m,), the
    [0, 0]-bin mask (n+m,), level index (n+m,), plasticity (n+m,), each pool prompt's original
    (n,: itself, or the prompt it copies, Level.distinct). Counts per level by largest remainder
    of the shares, pool order shuffled (levels are not in blocks)."""
    p0, zero, level = np.empty(n + m), np.zeros(n + m, dtype=bool), np.empty(n + m, dtype=np.int64)
    for lo, size, key in ((0, n, "share"), (n, m, "eval_share")):
        counts = split_counts([getattr(lv, key) for lv in levels], size)  # (L,)
        lv_of = np.repeat(np.arange(len(levels)), counts)  # (size,)
        rng.shuffle(lv_of)
        level[lo : lo + size] = lv_of
        for j, lv in enumerate(levels):
            at = lo + np.flatnonzero(lv_of == j)
            if not len(at):
                continue
            hist = lv.pass_rate_histogram
            if key == "eval_share" and lv.eval_pass_rate_histogram is not None:
                hist = lv.eval_pass_rate_histogram
            p0[at], zero[at] = draw_pass_rates(hist, len(at), cfg, rng)
    original = np.arange(n)  # (n,)
    for j, lv in enumerate(levels):  # Level.distinct: the first `distinct` of the level (in
        at = np.flatnonzero(level[:n] == j)  # shuffled pool order) are the originals, every
        if lv.distinct is None or lv.distinct >= len(at):  # other prompt copies one of them
            continue
        copies = at[lv.distinct :]
        original[copies] = at[: lv.distinct][rng.integers(0, lv.distinct, size=len(copies))]
        for a in (p0, zero):
            a[copies] = a[original[copies]]
    plasticity = np.array([lv.plasticity for lv in levels])[level]  # (n+m,)
    for j, lv in enumerate(levels):  # learnable_share: the hardest of each split never move
        if lv.learnable_share >= 1.0:
            continue
        for lo, size in ((0, n), (n, m)):
            at = lo + np.flatnonzero(level[lo : lo + size] == j)
            stuck = int(round((1.0 - lv.learnable_share) * len(at)))
            plasticity[at[np.argsort(p0[at], kind="stable")[:stuck]]] = 0.0
    # a copy moves as its original (the cut above may fall inside a set of copies, which share
    # p0: the realised share then differs from learnable_share by at most that set's size)
    plasticity[:n] = plasticity[original]
    return p0, zero, level, plasticity, original


def _hard_kind(
    levels: list[Level],
    level: np.ndarray,
    p0: np.ndarray,
    lam: np.ndarray,
    original: np.ndarray,
    n: int,
) -> np.ndarray:
    """Level.subskill_share: the hardest share of each level's learnable prompts (lam > 0, after
    plasticity, learnable_share and unlearnable_fraction), pool (the first n) and held-out each, by
    initial pass rate p0; a copy goes with its original. (n+m,) bool."""
    sub = np.zeros(len(p0), dtype=bool)
    for j, lv in enumerate(levels):
        if lv.subskill_share <= 0.0:
            continue
        for part in (slice(0, n), slice(n, len(p0))):
            at = part.start + np.flatnonzero((level[part] == j) & (lam[part] > 0))
            hard = int(round(lv.subskill_share * len(at)))
            sub[at[np.argsort(p0[at], kind="stable")[:hard]]] = True
    sub[:n] = sub[original]
    return sub


def _answer_classes(
    p0: np.ndarray, n: int, original: np.ndarray, cfg: SimConfig, inside: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(N,), (M,) answer classes (SimConfig.answer_classes): the bins of logit(p0) plus noise
    among the K quantiles of the pool's prompts (those `inside` (N+M,) only, if given:
    answer_scope), a copy taking its original's, K for a prompt outside; all 0 without classes.
    Drawn from their own stream, so the rest of the pool is the same with classes or without."""
    k = cfg.answer_classes
    if k == 0:
        return np.zeros(n, dtype=np.int64), np.zeros(len(p0) - n, dtype=np.int64)
    rng = np.random.default_rng([cfg.pool_seed, 7_919, 11])
    z = _logit(np.clip(p0, 1e-4, 1 - 1e-4)) + cfg.answer_noise * rng.standard_normal(len(p0))
    inside = np.ones(len(p0), dtype=bool) if inside is None else inside
    edges = np.quantile(z[:n][inside[:n]], np.linspace(0.0, 1.0, k + 1)[1:-1])
    cls = np.where(inside, np.searchsorted(edges, z), k).astype(np.int64)  # (N+M,) in [0, K]
    return cls[:n][original[:n]], cls[n:]


class SimPolicy:
    """Latent state of the simulated policy over a training pool and a held-out set (see module).

    Arrays: training pool (N,) `difficulty`, `cluster`, `learnable`, `mean_tokens`, `memo`;
    held-out set (M,) `eval_difficulty`, `eval_cluster`, `eval_learnable`; skills `s0`, `s` (K,).
    """

    def __init__(self, preset: Preset, config: SimConfig | None = None):
        cfg = config if config is not None else preset.sim
        self.preset, self.config = preset, cfg
        rng = np.random.default_rng([cfg.pool_seed, 7_919])
        n, m, k = preset.num_prompts, cfg.eval_prompts, cfg.num_clusters
        self.level_names: list[str] = []
        self.transfer_early: np.ndarray | None = None  # (K, K) W[a, b], Level.transfer
        self.transfer_late: np.ndarray | None = None  # (K, K) Level.transfer_late
        self.displace_matrix: np.ndarray | None = None  # (K, K) D[a, b], Level.displace
        if preset.levels is not None:
            p0, zero, level, plasticity, original = _draw_levels(preset.levels, n, m, cfg, rng)
            k = len(preset.levels)
            self.level_names = [lv.name for lv in preset.levels]
            idx = {name: j for j, name in enumerate(self.level_names)}

            def matrix(key: str) -> np.ndarray | None:
                if all(getattr(lv, key) is None for lv in preset.levels):
                    return None
                W = np.zeros((k, k))
                for a, lv in enumerate(preset.levels):
                    for b_name, w in (getattr(lv, key) or {}).items():
                        W[a, idx[b_name]] = w
                return W

            self.transfer_early = matrix("transfer")
            self.transfer_late = matrix("transfer_late")
            self.displace_matrix = matrix("displace")
            if self.transfer_late is not None and self.transfer_early is None:
                raise ValueError("levels: transfer_late rows need transfer rows")
        else:
            p0, zero = draw_pass_rates(preset.pass_rate_histogram, n + m, cfg, rng)  # (N+M,)
            original = np.arange(n)
        learnable = np.ones(n + m, dtype=bool)
        if cfg.unlearnable_fraction > 0:
            want = int(round(cfg.unlearnable_fraction * (n + m)))
            cand = np.flatnonzero(zero)
            if want > len(cand):
                raise ValueError(
                    f"unlearnable_fraction {cfg.unlearnable_fraction} exceeds the share of the "
                    f"histogram's [0, 0] bin ({len(cand) / (n + m):.3f})"
                )
            learnable[rng.choice(cand, size=want, replace=False)] = False
            learnable[:n] = learnable[original]  # a copy is as learnable as its original
        sub = np.zeros(n + m, dtype=bool)  # (N+M,) the levels' hard kinds (subskill_share)
        if preset.levels is not None:  # a level is its own cluster; lambda = its plasticity
            cluster = level
            learnable = learnable * plasticity  # (N+M,) float
            sub = _hard_kind(preset.levels, level, p0, learnable, original, n)
        else:
            cluster = rng.integers(0, k, size=n + m)  # (N+M,)
        mean_tokens = cfg.tokens_easy + (cfg.tokens_hard - cfg.tokens_easy) * (1.0 - p0)
        ceiling = np.ones(n + m)  # (N+M,) Level.ceiling; a prompt already above it keeps 1
        if preset.levels is not None and any(lv.ceiling < 1.0 for lv in preset.levels):
            c_lv = np.array([lv.ceiling for lv in preset.levels])[cluster]  # (N+M,)
            ceiling = np.where(p0 < 0.999 * c_lv, c_lv, 1.0)
        self.ceiling, self.eval_ceiling = ceiling[:n], ceiling[n:]  # (N,), (M,)
        self.initial_pass_rate = p0[:n]  # (N,)
        self.answer_class, self.eval_answer_class = _answer_classes(p0, n, original, cfg)
        self.prior_class, self.eval_prior_class = self.answer_class, self.eval_answer_class
        if cfg.answer_scope == "solvable" and cfg.answer_classes:  # classes of the prior alone
            inside = (learnable > 0) | (p0 >= UNSOLVABLE)  # (N+M,) outside: never solved
            if not inside[:n].any():
                raise ValueError("SimConfig.answer_scope='solvable': no pool prompt is solvable")
            cls = _answer_classes(p0, n, original, cfg, inside)
            self.prior_class, self.eval_prior_class = cls
        kk = max(cfg.answer_classes, 1)
        share = np.bincount(self.prior_class, minlength=kk + 1)[:kk]
        self.answer_share = share / share.sum()  # (K,) pi_b, among the prompts inside
        self.answer_delta = np.zeros(kk)  # (K,) the answer prior's offset (answer_shift)
        p0 = p0 / ceiling  # the logit part: p = ceiling sigmoid(l), l(0) = -b
        self.difficulty = -_logit(p0[:n])  # (N,) b_i
        self.cluster = cluster[:n].astype(np.int64)  # (N,)
        self.learnable = learnable[:n].astype(np.float64)  # (N,) lambda_i
        self.mean_tokens = mean_tokens[:n]  # (N,)
        self.eval_difficulty = -_logit(p0[n:])  # (M,)
        self.eval_cluster = cluster[n:].astype(np.int64)  # (M,)
        self.eval_learnable = learnable[n:].astype(np.float64)  # (M,)
        # Level.subskill_share: the hard kind's prompts (pool, held-out), rho per level, s_sub
        self.sub, self.eval_sub = sub[:n], sub[n:]  # (N,), (M,)
        self.has_sub = bool(sub.any())
        self.sub_rho = np.ones(k)  # (K,)
        if preset.levels is not None:
            self.sub_rho = np.array([lv.subskill_transfer for lv in preset.levels])
        self.s_sub = np.zeros(k)  # (K,) each level's hard-kind skill
        if self.has_sub:
            clash = [
                name
                for name, on in (
                    ("a transfer matrix (Level.transfer)", self.transfer_early is not None),
                    ("sim.interference", cfg.interference > 0.0),
                    ("sim.relearn", cfg.relearn > 0.0),
                )
                if on
            ]
            if clash:
                raise ValueError(
                    f"Level.subskill_share is not modelled together with {', '.join(clash)}"
                )
        # expected completion tokens of a rollout of the initial policy, pool mean: the length of
        # the reference batch of loss_norm="token_mean"
        fail = 1.0 + (cfg.fail_token_factor - 1.0) * (1.0 - self.initial_pass_rate)  # (N,)
        self.ref_tokens_per_rollout = float(np.mean(self.mean_tokens * fail))
        # (K,) bbar_c of contrast_decay: the mean difficulty of the cluster's learnable prompts,
        # pool and held-out together (a level may be absent from a cut pool; 0 if none learn)
        b_all, c_all = -_logit(p0), cluster.astype(np.int64)  # (N+M,)
        lam_all = learnable.astype(np.float64)  # (N+M,)
        self.mean_difficulty = np.array(
            [b_all[(c_all == c) & (lam_all > 0)].mean() if ((c_all == c) & (lam_all > 0)).any()
             else 0.0 for c in range(k)]
        )  # fmt: skip
        self.s0 = 0.0
        self.s = np.zeros(k)  # (K,)
        self.s_best = np.zeros(k)  # (K,) highest s_c so far (relearn)
        self.delta = np.zeros(k)  # (K,) displacement of each level's logits (displace_rate)
        if cfg.displace_rate > 0.0 and self.displace_matrix is None:
            raise ValueError(
                "SimConfig.displace_rate > 0 needs a preset with levels and `displace` rows "
                f"({preset.name} has none): nothing would be displaced"
            )
        self.original = original.astype(np.int64)  # (N,) whose memorisation prompt i shares
        self.memo = np.zeros(n)  # (N,) m_i as of version memo_version[i] (memo_decay: lazy)
        self.memo_version = np.zeros(n, dtype=np.int64)  # (N,)
        self.exposures = np.zeros(n)  # (N,) rollouts trained of each original, as of:
        self.exposure_version = np.zeros(n, dtype=np.int64)  # (N,) repeat_memory: lazy fading
        self.rms_v = np.zeros(k + 1)  # (K+1,) optimizer="rms": EMA of x^2 of s_0, s_1..s_K
        self.rms_steps = 0
        self.rms_scale: float | None = None  # a of optimizer="rms", set at its first step
        self.version = 0  # number of updates applied (the policy version of fresh rollouts)
        self.fast = 0.0  # f of fast_max: a shared logit every learnable prompt has gained
        self.wear = 0.0  # w of wear_rate: a logit every prompt has lost to noisy updates

    @property
    def num_prompts(self) -> int:
        return len(self.difficulty)

    def keep(self, ids: np.ndarray) -> None:
        """Cut the training pool to prompts `ids` before any update (the trainer's pool_size /
        pool_pick): they become prompts 0..P-1 in the given order; the held-out set, the levels'
        mean difficulties and the loss's reference length stay the full pool's, as the real
        trainer's warm start, held-out set and learning rate do (optimizer='rms': the step scale
        is set here from the full pool)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.version or len(ids) == 0 or len(np.unique(ids)) != len(ids):
            raise ValueError("keep: distinct prompt ids, before the first update")
        if ids.min() < 0 or ids.max() >= self.num_prompts:
            raise ValueError(f"keep: prompt ids must lie in [0, {self.num_prompts})")
        if self.config.optimizer == "rms" and self.rms_scale is None:
            self.rms_scale = self.first_step_signal()  # the step size is the full pool's
        for name in ("ceiling", "initial_pass_rate", "difficulty", "cluster", "learnable",
                     "mean_tokens", "answer_class", "prior_class", "sub"):  # fmt: skip
            setattr(self, name, getattr(self, name)[ids])
        # a copy points at the first kept prompt of its original (itself pointing at itself)
        _, first, inv = np.unique(self.original[ids], return_index=True, return_inverse=True)
        self.original = first[inv].astype(np.int64)
        p = len(ids)
        self.memo, self.exposures = np.zeros(p), np.zeros(p)
        self.memo_version = np.zeros(p, dtype=np.int64)
        self.exposure_version = np.zeros(p, dtype=np.int64)

    def nearest_half(self, size: int, by: str | None = None) -> np.ndarray:
        """The `size` prompts whose pass rate now is nearest 1/2 (ties: pool order), in pool
        order; by 'level' / 'answer': the same within each cluster / answer class, each keeping
        its share of the pool by largest remainders (the trainer's pool_pick 'mid', 'mid-level'
        and 'mid-answer')."""
        from rollalloc.tasks import nearest_half

        if by == "answer" and not self.config.answer_classes:
            raise ValueError("nearest_half(by='answer') needs SimConfig.answer_classes")
        col = None if by is None else {"level": self.cluster, "answer": self.answer_class}[by]
        return nearest_half(self.success_prob(np.arange(self.num_prompts)), size, col)

    def pool_columns(self) -> dict[str, np.ndarray]:
        """The pool's task columns, one value per prompt, for a strategy that reads them
        (posterior-signal's strata): `cluster` (its topic: a transfer group, drawn independently
        of difficulty unless the preset has levels) and, with levels, `level` (its name)."""
        cols = {"cluster": self.cluster.copy()}
        if self.level_names:
            cols["level"] = np.array(self.level_names)[self.cluster]
        if self.config.answer_classes:
            cols["answer"] = self.answer_class.copy()
        return cols

    @property
    def transfer(self) -> np.ndarray | None:
        """W now (K, K), or None without a transfer matrix: the early rows, moving linearly to the
        late ones over transfer_ramp_steps updates."""
        W, ramp = self.transfer_early, self.config.transfer_ramp_steps
        if W is None or self.transfer_late is None or ramp <= 0:
            return W
        f = min(1.0, self.version / ramp)
        return W + f * (self.transfer_late - W)

    def success_prob(self, prompt_ids: np.ndarray) -> np.ndarray:
        """p_i under the current policy for training prompts `prompt_ids` (P,) -> (P,)."""
        ids = np.asarray(prompt_ids, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= self.num_prompts):
            raise ValueError(
                f"prompt ids must lie in [0, {self.num_prompts}), got {ids.min()}..{ids.max()}"
            )
        c, sub = self.cluster[ids], self.sub[ids]  # (P,), (P,)
        skill = self.s0 + self.fast + self.level_skill(c, sub) + self.memorisation(ids)  # (P,)
        shift = self.delta[c]  # (P,) displacement, outside the plasticity
        if self.config.answer_shift > 0.0:  # the answer prior, outside the plasticity
            shift = shift + self.answer_offset()[self.prior_class[ids]]
        b = self._difficulty(self.difficulty[ids], c, self.learnable[ids], sub)
        return self.ceiling[ids] * _sigmoid(self.learnable[ids] * skill + shift - b - self.wear)

    def level_skill(self, c: np.ndarray, sub: np.ndarray) -> np.ndarray:
        """The cluster skill of prompts of clusters c (P,): s_c, or for the hard kind
        (Level.subskill_share, sub (P,) True) rho_c s_c + s_sub,c."""
        if not self.has_sub:
            return self.s[c]
        return np.where(sub, self.sub_rho[c] * self.s[c] + self.s_sub[c], self.s[c])

    def _difficulty(
        self, b: np.ndarray, c: np.ndarray, lam: np.ndarray, sub: np.ndarray
    ) -> np.ndarray:
        """b_i now (P,): a prompt harder than its cluster's mean moves toward it as the skill it
        learns by grows (contrast_decay): s_0 + s_c, or for the hard kind (Level.subskill_share)
        rho (s_0 + s_c) + s_sub,c, so that it closes in only as far as it is taught; easier ones
        keep theirs (learning never lowers them)."""
        kappa = self.config.contrast_decay
        if kappa == 0.0:
            return b
        learnt = self.s0 + self.s[c]  # (P,)
        if self.has_sub:
            learnt = np.where(sub, self.sub_rho[c] * learnt + self.s_sub[c], learnt)
        level_skill = np.maximum(lam * learnt, 0.0)  # (P,)
        bbar = self.mean_difficulty[c]  # (P,)
        return np.where(b > bbar, bbar + (b - bbar) * np.exp(-kappa * level_skill), b)

    def repeat_weight(self, prompt_ids: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """(G,) the share of each group's signal that teaches the skills (repeat_decay): the mean
        weight exp(-delta max(0, k - grace)) of the visits k its rollouts stand for. A step's
        rollouts of one original (a prompt and its copies) form one block, numbered from R_i, the
        original's rollouts trained before (faded by repeat_memory: then a real number, and the
        weights an integral over the block's span); each of its groups gets the block's mean, so two copies
        of 8 in one step pay as one group of 16 does, in either order. With repeat_harm eta an
        exposure weighs w - eta (1 - w) instead of w, so the mean is (1 + eta) mean(w) - eta."""
        cfg = self.config
        n = np.asarray(sizes, dtype=np.int64)  # (G,)
        if cfg.repeat_decay == 0.0:
            return np.ones(len(n))
        m, g, d = cfg.ref_group_size, int(cfg.repeat_grace), float(cfg.repeat_decay)

        def cum(x: np.ndarray) -> np.ndarray:  # integral of the weight over exposures [0, x)
            k, rest = x // m, x % m  # whole visits, rollouts into the next
            j = np.maximum(k - g, 0)  # visits past the grace
            past = np.minimum(k, g) + np.expm1(-d * j) / np.expm1(-d)  # g + sum_{v<j} e^(-d v)
            return m * past + rest * np.exp(-d * j)

        orig, where = np.unique(
            self.original[np.asarray(prompt_ids, dtype=np.int64)], return_inverse=True
        )  # (U,), (G,)
        if cfg.repeat_unit == "visits":  # (U,) one visit a step, whatever the block's rollouts
            N = np.full(len(orig), m, dtype=np.int64)
        else:  # (U,) the block's rollouts
            N = np.bincount(where, weights=n, minlength=len(orig)).astype(np.int64)
        R = self.exposures_now(orig)  # (U,)
        mean_w = ((cum(R + N) - cum(R)) / np.maximum(N, 1))[where]  # (G,)
        eta = float(cfg.repeat_harm)
        return mean_w if eta == 0.0 else (1.0 + eta) * mean_w - eta

    def exposures_now(self, orig: np.ndarray) -> np.ndarray:
        """(U,) the exposure counts of originals `orig` now: faded by 2^(-steps / repeat_memory)
        since they were last counted (repeat_memory 0: never faded)."""
        h = self.config.repeat_memory
        if h == 0.0:
            return self.exposures[orig]
        return self.exposures[orig] * 2.0 ** (-(self.version - self.exposure_version[orig]) / h)

    def count_exposures(self, prompt_ids: np.ndarray, sizes: np.ndarray) -> None:
        """sizes[g] more trained rollouts of each group's prompt (its original); repeats add up
        (repeat_unit='visits': ref_group_size for each original trained in the step)."""
        ids = self.original[np.asarray(prompt_ids, dtype=np.int64)]
        if self.config.repeat_unit == "visits":
            ids = np.unique(ids)
            sizes = np.full(len(ids), self.config.ref_group_size)
        if self.config.repeat_memory > 0.0:  # fade to now, then count from here
            uniq = np.unique(ids)
            self.exposures[uniq] = self.exposures_now(uniq)
            self.exposure_version[uniq] = self.version
        np.add.at(self.exposures, ids, np.asarray(sizes, dtype=np.float64))

    def memorisation(self, prompt_ids: np.ndarray) -> np.ndarray:
        """m_i now (P,): the stored value decayed by memo_decay for every step since it was set
        (a copy's is its original's, Level.distinct)."""
        ids = self.original[np.asarray(prompt_ids, dtype=np.int64)]
        if self.config.memo_decay == 0.0:
            return self.memo[ids]
        keep = (1.0 - self.config.memo_decay) ** (self.version - self.memo_version[ids])  # (P,)
        return self.memo[ids] * keep

    def eval_success_prob(self) -> np.ndarray:
        """p_j of every held-out prompt: (M,). No memorisation term: never trained on."""
        c, sub = self.eval_cluster, self.eval_sub  # (M,), (M,)
        skill = self.s0 + self.fast + self.level_skill(c, sub)  # (M,)
        shift = self.delta[c]  # (M,)
        if self.config.answer_shift > 0.0:
            shift = shift + self.answer_offset()[self.eval_prior_class]
        b = self._difficulty(self.eval_difficulty, c, self.eval_learnable, sub)
        return self.eval_ceiling * _sigmoid(self.eval_learnable * skill + shift - b - self.wear)

    def apply(
        self,
        prompt_ids: np.ndarray,
        signal: np.ndarray,
        *,
        energy: np.ndarray | None = None,
        norm: float = 1.0,
        rng: np.random.Generator | None = None,
        skill_weight: np.ndarray | None = None,
        advance: bool = True,
    ) -> None:
        """One optimiser step from the groups' signals u_g (G,) of prompts `prompt_ids` (G,).

        `norm` multiplies signal and noise (loss_norm="token_mean": reference tokens / batch tokens);
        `energy` (G,) is each group's e_g = sum_j w_j^2 A_j^2 / (ref_group_size - 1), the size of its
        gradient noise (noise_scale); `rng` draws noise and drift (needed only if they are on);
        `skill_weight` (G,) multiplies the skills' share of each group's signal
        (transfer_asymmetry), not its memorisation; `advance=False` leaves the policy version
        where it is (a mini-batch before the step's last, num_minibatches).
        """
        cfg = self.config
        ids = np.asarray(prompt_ids, dtype=np.int64)
        u = np.asarray(signal, dtype=np.float64) * self.learnable[ids]  # (G,) unlearnable: no move
        u_memo = u
        if skill_weight is not None:
            u = u * np.asarray(skill_weight, dtype=np.float64)  # (G,) what the skills receive
        plain = cfg.optimizer == "sgd" and cfg.progress_noise == 0.0 and norm == 1.0
        plain = plain and cfg.skill_drift == 0.0 and cfg.interference == 0.0 and cfg.relearn == 0.0
        plain = plain and cfg.update_cost == 0.0 and not self.has_sub and cfg.step_noise == 0.0
        if plain and self.transfer is None:
            # the model's original step, kept operation for operation (default figures unchanged)
            self.s0 += cfg.global_gain * float(u.sum())
            self.s += cfg.cluster_gain * np.bincount(
                self.cluster[ids], weights=u, minlength=len(self.s)
            )
        else:
            self._skill_step(ids, u, energy, norm, rng)
        if cfg.displace_rate > 0.0:  # __init__ refused a rate without `displace` rows
            self._displace(ids, np.asarray(signal, dtype=np.float64))
        if cfg.answer_shift > 0.0:
            self._shift_answers(ids, np.asarray(signal, dtype=np.float64))
        own = self.original[ids]  # (G,) a copy trains its original's memorisation
        if cfg.memo_decay > 0.0 and len(ids):
            uniq = np.unique(own)  # (U,) bring m_i to the current version before adding to it
            self.memo[uniq] = self.memorisation(uniq)
            self.memo_version[uniq] = self.version
        np.add.at(self.memo, own, cfg.memo_gain * norm * u_memo)
        self.version += int(advance)

    def _skill_step(
        self,
        ids: np.ndarray,
        u: np.ndarray,
        energy: np.ndarray | None,
        norm: float,
        rng: np.random.Generator | None,
    ) -> None:
        """s_0, s_c step with the effects: x = norm * (signal + noise), then sgd or rms, then drift.
        With a hard kind (Level.subskill_share) x carries K more entries, s_sub,1..s_sub,K, each
        in its level's block: the block's second moment sums both, and its step scale is shared."""
        cfg, k = self.config, len(self.s)
        x = np.empty(k + 1)  # (K+1,) step signal of s_0, s_1..s_K
        x[0] = u.sum()
        sub = self.sub[ids] if self.has_sub else None  # (G,) the hard kind's groups
        u_main = u if sub is None else np.where(sub, 0.0, u)  # (G,) what the level skill gets
        x[1:] = np.bincount(self.cluster[ids], weights=u_main, minlength=k)
        if cfg.relearn > 0.0:  # savings: a skill below its best relearns faster
            x[1:] *= np.where(self.s < self.s_best, 1.0 + cfg.relearn, 1.0)
        W = self.transfer
        if W is not None:  # every level's signal reaches the skills through W only
            x[0] = 0.0
            x[1:] = W.T @ x[1:]
        gamma = cfg.interference
        if gamma > 0.0:  # x_c - gamma * (sum of the other clusters' signals)
            x[1:] = (1.0 + gamma) * x[1:] - gamma * x[1:].sum()
        split = cfg.noise_progress_scale is not None
        noise = cfg.progress_noise  # the numerator's noise scale
        if noise > 0.0 or cfg.skill_drift > 0.0:
            if rng is None:
                raise ValueError("SimPolicy.apply: noise_scale / skill_drift need an rng")
        e_c = None
        if cfg.noise_scale > 0.0 or noise > 0.0:
            e = np.zeros(len(ids)) if energy is None else np.asarray(energy, dtype=np.float64)
            e = e * self.learnable[ids]  # (G,)
            e_main = e if sub is None else np.where(sub, 0.0, e)
            e_c = np.concatenate(
                [[e.sum()], np.bincount(self.cluster[ids], weights=e_main, minlength=k)]
            )  # (K+1,)
            if W is not None:  # independent noise per source, scaled as its signal
                e_c[0], e_c[1:] = 0.0, (W**2).T @ e_c[1:]
            if gamma > 0.0:
                e_c[1:] = (1.0 - gamma**2) * e_c[1:] + gamma**2 * e_c[1:].sum()
            if sub is not None:  # the hard kind's own groups' noise, on its own skill only
                e_sub = np.bincount(self.cluster[ids], weights=np.where(sub, e, 0.0), minlength=k)
                e_c = np.concatenate([e_c, e_sub])  # (2K+1,)
        if sub is not None:  # the hard kind's own skill: its own groups' signal only
            x_sub = np.bincount(self.cluster[ids], weights=np.where(sub, u, 0.0), minlength=k)
            x = np.concatenate([x, x_sub])  # (2K+1,)

        def per_block(v: np.ndarray) -> np.ndarray:  # (len(x),) -> (K+1,): a level with its kind
            return v if sub is None else np.concatenate([v[:1], v[1 : k + 1] + v[k + 1 :]])

        def full(v: np.ndarray) -> np.ndarray:  # (K+1,) -> (len(x),): the hard kind's its level's
            return v if sub is None else np.concatenate([v, v[1:]])

        x_sq = None  # (K+1,) what enters the second moment v of optimizer="rms"
        if split:  # the expected square of signal + trace noise (noise_progress_scale)
            trace = 0.0 if e_c is None else cfg.noise_scale * e_c
            x_sq = per_block(norm**2 * (x**2 + trace))
        if noise > 0.0:
            x += np.sqrt(noise * e_c) * rng.standard_normal(len(x))
        x *= norm
        if x_sq is None:
            x_sq = per_block(x**2)  # one noise: the step's own square
        gains = full(np.concatenate([[cfg.global_gain], np.full(k, cfg.cluster_gain)]))
        if cfg.optimizer == "rms":
            if self.rms_scale is None:
                self.rms_scale = self.first_step_signal()
            b = cfg.rms_beta
            self.rms_steps += 1
            if cfg.rms_shared:  # one second moment for s_1..s_K: the mean of their squares
                x_sq = np.concatenate([x_sq[:1], np.full(k, x_sq[1:].mean())])
            self.rms_v = b * self.rms_v + (1.0 - b) * x_sq
            v_hat = self.rms_v / (1.0 - b**self.rms_steps)  # (K+1,) bias-corrected
            # a cluster skill gets 1/K of the expected signal: its step is a / K in size
            a = full(np.concatenate([[self.rms_scale], np.full(k, self.rms_scale / k)]))
            den = full(np.sqrt(v_hat))  # 0 where a skill has had no signal (or a = 0)
            step = np.divide(
                a * x, den, out=np.zeros_like(x), where=den > 1e-12 * np.maximum(a, 1e-300)
            )
            if cfg.update_cost > 0.0:  # second order: a step of z costs c z^2 / a of progress
                cost = np.divide(step**2, a, out=np.zeros_like(step), where=a > 0.0)
                step = step - cfg.update_cost * cost
        else:
            step = x
        delta = gains * step  # (K+1,), or (2K+1,) with the hard kind's moves last
        if cfg.step_noise > 0.0:  # the step's signal share (its direction's squared cosine)
            if energy is None:
                raise ValueError("SimPolicy.apply: step_noise needs the groups' noise energies")
            S = float(u.sum())
            E = float((np.asarray(energy, dtype=np.float64) * self.learnable[ids]).sum())
            delta = delta * (S**2 / (S**2 + cfg.step_noise * E) if S > 0.0 else 0.0)
        if sub is not None:
            self.s_sub += delta[k + 1 :]
            delta = delta[: k + 1]
        if cfg.skill_drift > 0.0:
            delta += cfg.skill_drift * rng.standard_normal(k + 1)
        self.s0 += float(delta[0])
        self.s += delta[1:]
        self.s_best = np.maximum(self.s_best, self.s)

    def fast_step(self, prompt_ids: np.ndarray, signal: np.ndarray, energy: np.ndarray) -> None:
        """One optimiser update's move of the fast component (fast_max): f += r (F - f) c^2 -
        rho (1 - c^2), c^2 = S^2 / (S^2 + B_f E), from the update's group signals u_g (G,) and noise
        energies e_g (G,) of prompts `prompt_ids` (G,), both after plasticity. Scale free: a loss
        normaliser would multiply S and the noise alike."""
        cfg = self.config
        ids = np.asarray(prompt_ids, dtype=np.int64)
        S = float((np.asarray(signal, dtype=np.float64) * self.learnable[ids]).sum())
        if S <= 0.0:
            return
        E = float((np.asarray(energy, dtype=np.float64) * self.learnable[ids]).sum())
        c2 = S**2 / (S**2 + cfg.fast_noise * E)
        self.fast += cfg.fast_rate * (cfg.fast_max - self.fast) * c2
        self.fast -= cfg.fast_damage * (1.0 - c2)

    def wear_step(self, signal: np.ndarray, energy: np.ndarray) -> None:
        """One optimiser update's wear (wear_rate): w <- (1 - h) w + omega (1 - c^2), c^2 = S^2 /
        (S^2 + B_w E), from the update's group signals u_g (G,) and noise energies e_g (G,), before
        plasticity (under wear_unit='prompts' the learner passes u_g^2 as e_g). An update without
        signal or noise (no groups, or none with variance) leaves w."""
        cfg = self.config
        S = float(np.asarray(signal, dtype=np.float64).sum())  # >= 0: a group's signal is
        E = float(np.asarray(energy, dtype=np.float64).sum())  # a sum of squares, as its energy
        if S <= 0.0 and E <= 0.0:
            return
        den = S**2 + cfg.wear_noise * E
        c2 = S**2 / den if den > 0.0 else 1.0  # B_w = 0: no update is noise
        self.wear = (1.0 - cfg.wear_heal) * self.wear + cfg.wear_rate * (1.0 - c2)

    def _displace(self, ids: np.ndarray, u: np.ndarray) -> None:
        """delta_b += rate * (-sum_a D[a, b] sigma_a^k - delta_b), sigma_a level a's share of the
        update's summed |group signal| u (G,), before plasticity: the gradients' share, not what they
        teach (an update without signal moves nothing)."""
        cfg = self.config
        x = np.bincount(self.cluster[ids], weights=np.abs(u), minlength=len(self.s))  # (K,)
        if x.sum() <= 0.0:
            return
        sigma = x / x.sum()  # (K,)
        target = -(sigma**cfg.displace_power) @ self.displace_matrix  # (K,)
        self.delta += cfg.displace_rate * (target - self.delta)

    def answer_offset(self) -> np.ndarray:
        """(K,) the logit offset of a prompt of each answer class (answer_shift): a softmax
        prior over the answers, delta_a - log sum_b pi_b exp(delta_b). Raising one class's answers
        takes probability from every other prompt's, whose wrong answers are spread over the
        classes as the pool's: p' = p e^delta_a / (p e^delta_a + (1 - p) sum_b pi_b e^delta_b).
        Under answer_scope='solvable' a (K + 1)-th entry, 0: a prompt outside the prior."""
        d = self.answer_delta
        off = d - np.log(np.dot(self.answer_share, np.exp(d)))
        return np.append(off, 0.0) if self.config.answer_scope == "solvable" else off

    def _shift_answers(self, ids: np.ndarray, u: np.ndarray) -> None:
        """delta_b += r (c (sigma_b - pi_b) - delta_b) (SimConfig.answer_shift), sigma_b class b's
        share of the update's summed |group signal| u (G,), pi_b its share of the pool (of the
        prompts inside the prior, answer_scope)."""
        cfg = self.config
        k = len(self.answer_delta)
        x = np.bincount(self.prior_class[ids], weights=np.abs(u), minlength=k + 1)[:k]  # (K,)
        if x.sum() <= 0.0:
            return
        target = cfg.answer_shift * (x / x.sum() - self.answer_share)  # (K,)
        self.answer_delta += cfg.answer_rate * (target - self.answer_delta)

    def first_step_signal(self) -> float:
        """Expected summed signal sum_g u_g of a step of uniform GRPO on the initial pool (a batch
        of norm_ref_prompts groups of ref_group_size): the step size of
        optimizer="rms"."""
        from rollalloc.sim.roles import expected_group_signal  # roles imports this module

        cfg = self.config
        p0 = self.ceiling * _sigmoid(-self.difficulty)  # (N,) initial pass rates
        eg = expected_group_signal(p0, cfg.ref_group_size, cfg.adv_eps) * self.learnable  # (N,)
        groups = cfg.norm_ref_prompts
        return float(groups * eg.mean() / (cfg.ref_group_size / 2.0))

    def state_dict(self) -> dict[str, Any]:
        return {
            "s0": self.s0,
            "s": self.s.copy(),
            "memo": self.memo.copy(),
            "memo_version": self.memo_version.copy(),
            "rms_v": self.rms_v.copy(),
            "s_best": self.s_best.copy(),
            "delta": self.delta.copy(),
            "rms_steps": self.rms_steps,
            "rms_scale": self.rms_scale,
            "version": self.version,
            "fast": self.fast,
            "wear": self.wear,
            "s_sub": self.s_sub.copy(),
            "exposures": self.exposures.copy(),
            "exposure_version": self.exposure_version.copy(),
            "answer_delta": self.answer_delta.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.s0 = float(state["s0"])
        self.s = np.array(state["s"], dtype=np.float64)
        self.memo = np.array(state["memo"], dtype=np.float64)
        self.version = int(state["version"])
        # the effects' state (absent from a state saved before they existed: they were off)
        n, k = len(self.memo), len(self.s)
        self.memo_version = np.array(state.get("memo_version", np.zeros(n)), dtype=np.int64)
        self.rms_v = np.array(state.get("rms_v", np.zeros(k + 1)), dtype=np.float64)
        self.s_best = np.array(state.get("s_best", np.maximum(self.s, 0.0)), dtype=np.float64)
        self.delta = np.array(state.get("delta", np.zeros(k)), dtype=np.float64)
        self.rms_steps = int(state.get("rms_steps", 0))
        self.fast = float(state.get("fast", 0.0))
        self.wear = float(state.get("wear", 0.0))
        self.s_sub = np.array(state.get("s_sub", np.zeros(k)), dtype=np.float64)
        self.answer_delta = np.array(
            state.get("answer_delta", np.zeros(len(self.answer_delta))), dtype=np.float64
        )
        self.exposures = np.array(state.get("exposures", np.zeros(n)), dtype=np.float64)
        # a state saved before repeat_memory: its counts are as of now (not faded since version 0)
        self.exposure_version = np.array(
            state.get("exposure_version", np.full(n, self.version)), dtype=np.int64
        )
        scale = state.get("rms_scale")
        self.rms_scale = None if scale is None else float(scale)
