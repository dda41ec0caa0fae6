"""The policy loss against a hand computation on a toy ragged batch, clipping on both sides."""

from __future__ import annotations

import math

import torch

from rollalloc.advantages import group_advantages_torch
from rollalloc.train.loss import policy_loss


def test_policy_loss_matches_hand_computation():
    # two groups: sizes 2 and 3 (ragged); rollouts have 2, 1, 3, 2, 1 completion tokens
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    adv = group_advantages_torch(rewards, [2, 3])
    # by hand: group 1 mean .5 std .7071 -> +-0.7071; group 2 mean 2/3 std .5774 -> .5774,-1.1547
    expect_adv = [0.70710, -0.70710, 0.57735, 0.57735, -1.15470]
    assert torch.allclose(adv, torch.tensor(expect_adv), atol=1e-4)
    lengths = [2, 1, 3, 2, 1]
    T = 3
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(T)] for n in lengths])
    old = torch.full((5, T), -1.0)
    # ratios: above 1+0.28 for a positive advantage (clipped), below 1-0.2 for a negative one
    # (clipped), inside the interval, and the unclipped sides (A>0 with small ratio, A<0 with a big
    # one) where the pessimistic max keeps the unclipped term
    log_ratios = torch.tensor(
        [
            [math.log(1.5), math.log(0.9), 0.0],  # A>0: clipped to 1.28, then unclipped 0.9
            [math.log(0.5), 0.0, 0.0],  # A<0, ratio .5: clipped to 0.8
            [math.log(1.1), math.log(0.6), math.log(1.3)],  # A>0: 1.1, 0.6 (unclipped), 1.28
            [math.log(2.0), 0.0, 0.0],  # A>0: 1.28 (clipped), 1.0
            [math.log(1.5), 0.0, 0.0],  # A<0, ratio 1.5: max(-A*1.5, -A*1.2) = -A*1.5 unclipped
        ]
    )
    logp = (old + log_ratios).requires_grad_(True)
    loss, stats = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    a = expect_adv
    per_token = [
        -a[0] * 1.28,
        -a[0] * 0.9,
        -a[1] * 0.8,
        -a[2] * 1.1,
        -a[2] * 0.6,
        -a[2] * 1.28,
        -a[3] * 1.28,
        -a[3] * 1.0,
        -a[4] * 1.5,
    ]
    assert abs(loss.item() - sum(per_token) / 9) < 1e-4
    # clipped tokens carry no gradient, unclipped ones do
    loss.backward()
    g = logp.grad
    assert g[0, 0] == 0 and g[0, 1] != 0
    assert g[1, 0] == 0
    assert g[2, 0] != 0 and g[2, 1] != 0 and g[2, 2] == 0
    assert g[3, 0] == 0 and g[3, 1] != 0
    assert g[4, 0] != 0
    assert abs(float(stats["clip_frac_high"]) - 3 / 9) < 1e-6
    assert abs(float(stats["clip_frac_low"]) - 1 / 9) < 1e-6
    # num_tokens sets the token-mean denominator (rollouts left out of the forward still count)
    loss2, _ = policy_loss(logp, old, adv, mask, num_tokens=18)
    assert abs(float(loss2) - float(loss) / 2) < 1e-6


def test_kl_term_is_zero_at_the_reference_and_positive_elsewhere():
    logp = torch.tensor([[-1.0, -2.0]])
    mask = torch.ones(1, 2)
    zero_adv = torch.zeros(1)
    l0, _ = policy_loss(logp, logp, zero_adv, mask, ref_logp=logp, kl_coef=0.1)
    l1, s1 = policy_loss(logp, logp, zero_adv, mask, ref_logp=logp - 0.5, kl_coef=0.1)
    assert float(l0) == 0.0 and float(l1) > 0 and float(s1["kl_ref"]) > 0
