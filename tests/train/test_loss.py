"""The policy loss against a hand computation on a toy ragged batch, clipping on both sides."""

from __future__ import annotations

import math

import pytest
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


def _one_token(adv: float, log_ratio: float, **kw):
    """Loss and d loss / d logp of a single completion token (token-mean over 1 token)."""
    old = torch.zeros(1, 1)
    logp = torch.full((1, 1), log_ratio, requires_grad=True)
    loss, stats = policy_loss(logp, old, torch.tensor([adv]), torch.ones(1, 1), **kw)
    loss.backward()
    return float(loss), float(logp.grad[0, 0]), stats


def test_dual_clip_caps_negative_advantages_as_verl():
    # verl, verl/trainer/ppo/core_algos.py, compute_policy_loss_vanilla (clip_ratio_c = 3.0 by
    # default), restated: l = max(-A r, -A clip(r, 1-0.2, 1+0.28)); for A < 0, l = min(l, -A * 3).
    # A = -1, r = 10: max(10, 1.28) = 10, min(10, 3) = 3, a constant: gradient 0.
    loss, grad, stats = _one_token(-1.0, math.log(10.0))
    assert abs(loss - 3.0) < 1e-6 and grad == 0.0
    assert float(stats["clip_frac_dual"]) == 1.0
    # without the dual clip: -A r = 10, gradient d(-A e^x)/dx = -A r = 10
    loss, grad, stats = _one_token(-1.0, math.log(10.0), clip_ratio_c=None)
    assert abs(loss - 10.0) < 1e-5 and abs(grad - 10.0) < 1e-5
    assert float(stats["clip_frac_dual"]) == 0.0
    # below c the dual clip does not bind: A = -1, r = 2.5 -> 2.5, gradient 2.5
    loss, grad, _ = _one_token(-1.0, math.log(2.5))
    assert abs(loss - 2.5) < 1e-6 and abs(grad - 2.5) < 1e-6
    # A = -0.5, c = 2: r = 10 -> min(5, 1) = 1, no gradient
    loss, grad, _ = _one_token(-0.5, math.log(10.0), clip_ratio_c=2.0)
    assert abs(loss - 1.0) < 1e-6 and grad == 0.0
    # positive advantages are untouched: A = 1, r = 10 -> max(-10, -1.28) = -1.28 (clipped, grad 0)
    loss, grad, _ = _one_token(1.0, math.log(10.0))
    assert abs(loss + 1.28) < 1e-6 and grad == 0.0
    with pytest.raises(ValueError, match="clip_ratio_c"):
        _one_token(-1.0, 0.0, clip_ratio_c=1.0)


def test_log_ratio_is_clamped_so_huge_ratios_give_finite_zero_gradients():
    # verl clamps log_prob - old_log_prob to [-20, 20] before exp: a capped token (dual clip for
    # A < 0, clip-high for A > 0) then has gradient 0, not 0 * exp(100) = 0 * inf = nan
    loss, grad, _ = _one_token(-1.0, 100.0)
    assert abs(loss - 3.0) < 1e-6 and grad == 0.0
    loss, grad, _ = _one_token(1.0, 100.0)
    assert abs(loss + 1.28) < 1e-6 and grad == 0.0
    # without the dual clip the A < 0 loss is the clamped ratio exp(20), finite
    loss, grad, _ = _one_token(-1.0, 100.0, clip_ratio_c=None)
    assert math.isfinite(loss) and abs(loss / math.exp(20.0) - 1) < 1e-5 and grad == 0.0


def test_policy_loss_equals_verls_when_verl_is_installed():
    core = pytest.importorskip("verl.trainer.ppo.core_algos")
    if not hasattr(core, "compute_policy_loss_vanilla"):
        pytest.skip("this verl has no compute_policy_loss_vanilla")
    from omegaconf import OmegaConf

    g = torch.Generator().manual_seed(0)
    old = -torch.rand(6, 5, generator=g) * 3
    log_ratio = torch.randn(6, 5, generator=g) * 1.5  # ratios up to ~e^4: the dual clip binds
    log_ratio[0, 0], log_ratio[1, 1] = 100.0, -100.0  # and the +-20 clamp
    logp = (old + log_ratio).requires_grad_(True)
    adv = torch.tensor([-1.0, 1.0, -0.5, 0.7, -2.0, 0.0])
    mask = (torch.rand(6, 5, generator=g) > 0.2).float()
    cfg = OmegaConf.create(
        {
            "clip_ratio": 0.2,
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.28,
            "clip_ratio_c": 3.0,
            "global_batch_info": {},  # verl 0.9: agg_loss options (one data-parallel rank)
        }
    )
    ours, _ = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0)
    (g_ours,) = torch.autograd.grad(ours, logp)
    theirs = core.compute_policy_loss_vanilla(
        old, logp, adv[:, None].expand(6, 5), mask, loss_agg_mode="token-mean", config=cfg
    )[0]
    (g_theirs,) = torch.autograd.grad(theirs, logp)
    assert torch.allclose(ours, theirs, atol=1e-6) and torch.allclose(g_ours, g_theirs, atol=1e-6)
    assert torch.isfinite(g_ours).all()
